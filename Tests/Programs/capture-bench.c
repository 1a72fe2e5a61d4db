/* The crash `make bench` times from the fault to the program's exit (Sources/ImageLogBenchmarks/CaptureBench.swift).
   Usage: capture-bench THREADS [CRASHPAD_HANDLER DATABASE]
   THREADS - 1 named workers sleep in read(2); once every one is asleep the main thread writes
   "fault-ns=N" (CLOCK_MONOTONIC, which the benchmark compares with the moment it sees the exit) and
   crashes three calls deep. With CRASHPAD_HANDLER the program does what Crashpad's client does at a
   crash: its SIGSEGV handler fills Crashpad's ExceptionInformation (util/linux/exception_information.h:
   the siginfo and ucontext addresses and the crashed thread), forks, execs
     CRASHPAD_HANDLER --database=DATABASE --trace-parent-with-exception=0xADDRESS --no-periodic-tasks
   waits for it, puts SIG_DFL back and returns, so the fault kills the program. Without it the program
   has no handler: `imagelog run --crash-dir` gives it one. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test-threads.h"

struct exception_information {
  uint64_t siginfo_address;
  uint64_t context_address;
  pid_t thread_id;
};
static struct exception_information exception_information;
static char *handler_arguments[8];
static char database_argument[4096], address_argument[64];
static int never_written[2];
static atomic_int ready;
static pid_t worker_tids[1024];

static void crashpad_handler(int signal, siginfo_t *info, void *context) {
  exception_information.siginfo_address = (uint64_t)(uintptr_t)info;
  exception_information.context_address = (uint64_t)(uintptr_t)context;
  exception_information.thread_id = (pid_t)syscall(SYS_gettid);
  static const char prefix[] = "--trace-parent-with-exception=0x";
  uint64_t address = (uint64_t)(uintptr_t)&exception_information;
  char digits[17];
  int count = 0;
  do digits[count++] = "0123456789abcdef"[address & 0xF];
  while ((address >>= 4) != 0);
  memcpy(address_argument, prefix, sizeof prefix - 1);
  for (int i = 0; i < count; i++) address_argument[sizeof prefix - 1 + i] = digits[count - 1 - i];
  address_argument[sizeof prefix - 1 + count] = 0;
  handler_arguments[2] = address_argument;
  pid_t child = fork();
  if (child == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(handler_arguments[0], handler_arguments);
    _exit(127);
  }
  int status;
  if (child > 0) while (waitpid(child, &status, 0) < 0) {}
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = SIG_DFL;
  sigaction(signal, &action, NULL);
}

static void *worker(void *argument) {
  char name[16];
  snprintf(name, sizeof name, "worker-%d", (int)(intptr_t)argument);
  pthread_setname_np(pthread_self(), name);
  worker_tids[(intptr_t)argument] = (pid_t)syscall(SYS_gettid);
  atomic_fetch_add(&ready, 1);
  char byte;
  while (read(never_written[0], &byte, 1) != 0) {}
  return NULL;
}

__attribute__((noinline)) void bench_crash_deep(volatile int *pointer) {
  *pointer = 1;
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void bench_crash_middle(volatile int *pointer) {
  bench_crash_deep(pointer);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void bench_crash(void) {
  bench_crash_middle(NULL);
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 4) {
    fprintf(stderr, "usage: %s THREADS [CRASHPAD_HANDLER DATABASE]\n", argv[0]);
    return 64;
  }
  int threads = atoi(argv[1]);
  if (threads < 1 || threads > 1024 || pipe(never_written) != 0) return 64;
  if (argc == 4) {
    snprintf(database_argument, sizeof database_argument, "--database=%s", argv[3]);
    handler_arguments[0] = argv[2];
    handler_arguments[1] = database_argument;
    handler_arguments[3] = "--no-periodic-tasks";
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = crashpad_handler;
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &action, NULL);
  }
  for (intptr_t i = 1; i < threads; i++) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, (void *)i) != 0) return 1;
  }
  while (atomic_load(&ready) < threads - 1) sched_yield();
  for (int i = 1; i < threads; i++) while (!test_thread_asleep(worker_tids[i])) sched_yield();
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  printf("fault-ns=%llu\n", (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec);
  fflush(stdout);
  bench_crash();
  return 0;
}
