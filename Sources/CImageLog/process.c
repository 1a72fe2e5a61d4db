#define _GNU_SOURCE
#include "CImageLog.h"
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <sys/xattr.h>

ssize_t il_read_process_memory(pid_t pid, uint64_t address, void *buffer, size_t length) {
  struct iovec local = { buffer, length };
  struct iovec remote = { (void *)(uintptr_t)address, length };
  return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

static volatile sig_atomic_t interrupted;

static void note_interrupt(int signal_number) { (void)signal_number; interrupted = 1; }

void il_catch_interrupts(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = note_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  /* no SA_RESTART: a blocked poll/sleep returns EINTR */
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
}

int il_was_interrupted(void) { return interrupted != 0; }

int il_set_file_attribute(int descriptor, const char *name, const void *value, size_t size) {
  return fsetxattr(descriptor, name, value, size, 0);
}
