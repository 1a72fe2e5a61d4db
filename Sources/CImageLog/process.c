#define _GNU_SOURCE
#include "CImageLog.h"
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

ssize_t il_read_process_memory(pid_t pid, uint64_t address, void *buffer, size_t length) {
  struct iovec local = { buffer, length };
  struct iovec remote = { (void *)(uintptr_t)address, length };
  return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

int il_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  (void)pid;
  return -1;
#endif
}

static volatile sig_atomic_t forwarded_child;
static volatile sig_atomic_t interrupted;

static void forward(int signal_number) {
  if (forwarded_child > 0) kill((pid_t)forwarded_child, signal_number);
}

void il_forward_termination_signals(pid_t child) {
  forwarded_child = child;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = forward;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, NULL);
  sigaction(SIGHUP, &action, NULL);
  /* The terminal sends SIGINT and SIGQUIT to the whole process group: the child gets its own. */
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
}

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
