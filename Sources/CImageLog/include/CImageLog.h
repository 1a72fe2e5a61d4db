#ifndef CIMAGELOG_H
#define CIMAGELOG_H
/* The only C the Swift side sees. Every function is prefixed il_. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "CImageLogCrash.h" /* crash-time image table and handler (crash.c) */

/* Copies up to `length` bytes at `address` in process `pid` into `buffer`; returns the count
   copied or -1 with errno set. Mirrors process_vm_readv(2) with one local and one remote range. */
ssize_t il_read_process_memory(pid_t pid, uint64_t address, void *buffer, size_t length);

#endif
