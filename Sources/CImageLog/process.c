#define _GNU_SOURCE
#include "CImageLog.h"
#include <sys/uio.h>

ssize_t il_read_process_memory(pid_t pid, uint64_t address, void *buffer, size_t length) {
  struct iovec local = { buffer, length };
  struct iovec remote = { (void *)(uintptr_t)address, length };
  return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}
