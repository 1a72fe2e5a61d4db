#ifndef CIMAGELOG_H
#define CIMAGELOG_H
/* The only C the Swift side sees. Every function is prefixed il_. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* other processes */
/* Copies up to `length` bytes at `address` in process `pid` into `buffer`; returns the count
   copied or -1 with errno set. Mirrors process_vm_readv(2) with one local and one remote range. */
ssize_t il_read_process_memory(pid_t pid, uint64_t address, void *buffer, size_t length);
/* A descriptor that polls readable when `pid` (our child) exits, or -1. Mirrors pidfd_open(2). */
int il_pidfd_open(pid_t pid);
/* For `imagelog run`: SIGTERM and SIGHUP sent to us are sent on to `child`; SIGINT and SIGQUIT
   (which a terminal sends to the whole group, child included) are ignored by us. */
void il_forward_termination_signals(pid_t child);
/* For `imagelog watch`: SIGINT and SIGTERM set a flag and interrupt blocking calls (EINTR). */
void il_catch_interrupts(void);
/* True once il_catch_interrupts's handler has run. */
int il_was_interrupted(void);
/* end of other processes */

#endif
