#define _GNU_SOURCE
#include "CImageLogProcess.h"
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <sys/xattr.h>
#include <sys/auxv.h>

ssize_t il_read_process_memory(pid_t pid, uint64_t address, void *buffer, size_t length) {
  struct iovec local = { buffer, length };
  struct iovec remote = { (void *)(uintptr_t)address, length };
  return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

static int exited(char state) { return state == 'Z' || state == 'X'; }

pid_t il_live_thread(pid_t pid) {
  il_task_stat stat;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  if (!il_read_task_stat(AT_FDCWD, path, &stat) || !exited(stat.state)) return 0;
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *directory = opendir(path);
  if (!directory) return 0;
  pid_t found = 0;
  struct dirent *entry;
  while (!found && (entry = readdir(directory)) != NULL) {
    char *end = NULL;
    long tid = strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != 0 || tid <= 0 || tid > INT32_MAX || tid == pid) continue;  /* ".", "..", the main thread */
    char stat_path[32];
    snprintf(stat_path, sizeof stat_path, "%ld/stat", tid);
    if (il_read_task_stat(dirfd(directory), stat_path, &stat) && !exited(stat.state)) found = (pid_t)tid;
  }
  closedir(directory);
  return found;
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

long il_get_file_attribute(const char *path, const char *name, void *value, size_t size) {
  return lgetxattr(path, name, value, size);
}

uint64_t il_vdso_address(void) { return (uint64_t)getauxval(AT_SYSINFO_EHDR); }

uint64_t il_page_size(void) {
  unsigned long size = getauxval(AT_PAGESZ);
  return size ? (uint64_t)size : 4096;
}
