/* A crashing program whose minidump Crashpad's own handler writes, for the minidump reader's tests.
   Usage: minidump-crashpad HANDLER DATABASE [segv|abort|library|return|pause [HANDLER-ARGUMENT...]]

   Three named threads block in system calls (two in read(2) on a pipe nobody writes, one in
   nanosleep(2)); once the kernel shows each asleep, the main thread prints "ready" and crashes a
   few calls deep, reached through qsort(3)'s comparator: "segv" (the default) writes through the
   address 0x28, "abort" calls abort(3). "library" calls minidump_library_crash() instead, from a
   shared library the program is linked with (Tests/Programs/minidump-crashpad-lib.c; without one
   the program exits with 2). "return" returns from main after "ready" with the handler installed
   and the threads blocked: a program that links this file with main renamed
   (-Dmain=minidump_crashpad_main, e.g. a Swift program) then crashes in its own code; SIGILL and
   SIGTRAP (a Swift trap) are handled as SIGSEGV is. "pause" waits in pause(2) after "ready", for a
   dump of the live process by another writer, until a signal sent to it (kill -SEGV) has Crashpad
   dump it too. The signal handler does what Crashpad's client does in a
   crash: it fills Crashpad's ExceptionInformation (the siginfo_t and ucontext_t the kernel gave it,
   and the crashing thread's id), forks, and the child execs
     HANDLER --database=DATABASE --trace-parent-with-exception=0xADDRESS --no-periodic-tasks [HANDLER-ARGUMENT...]
   (--annotation=KEY=VALUE, for one) which ptrace-attaches to this process, reads that structure out of its memory and writes the
   dump (DATABASE/pending/UUID.dmp). The handler is waited for, then the signal is raised again
   with its default action, so the program dies of it. Everything in the handler is
   async-signal-safe (no stdio, no malloc). */
#define _GNU_SOURCE
#include <pthread.h>
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

/* Crashpad's ExceptionInformation (util/linux/exception_information.h). */
struct exception_information {
  uint64_t siginfo_address;
  uint64_t context_address;
  pid_t thread_id;
};

static struct exception_information exception_information;
static const char *handler_path;
static char database_argument[4096];
static char address_argument[64];
static char *handler_arguments[32];
static int blocker[2];
static atomic_int tids[3];
static const char *mode = "segv";

/* "--trace-parent-with-exception=0x" and the address in hex, without snprintf (not async-signal-safe). */
static void format_address_argument(uint64_t address) {
  static const char prefix[] = "--trace-parent-with-exception=0x";
  char digits[17];
  int count = 0;
  do {
    digits[count++] = "0123456789abcdef"[address & 0xF];
    address >>= 4;
  } while (address != 0);
  memcpy(address_argument, prefix, sizeof prefix - 1);
  for (int i = 0; i < count; i++) address_argument[sizeof prefix - 1 + i] = digits[count - 1 - i];
  address_argument[sizeof prefix - 1 + count] = 0;
}

static void crash_signal(int signal, siginfo_t *info, void *context) {
  exception_information.siginfo_address = (uint64_t)(uintptr_t)info;
  exception_information.context_address = (uint64_t)(uintptr_t)context;
  exception_information.thread_id = (pid_t)syscall(SYS_gettid);
  format_address_argument((uint64_t)(uintptr_t)&exception_information);
  pid_t child = fork();
  if (child == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    handler_arguments[2] = address_argument;
    execv(handler_path, handler_arguments);
    _exit(127);
  }
  if (child > 0) {
    int status;
    while (waitpid(child, &status, 0) < 0) {}
  }
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = SIG_DFL;
  sigaction(signal, &action, NULL);
  /* abort(3) raises SIGABRT again itself, and neither a trap (int3) nor a signal another process sent
     (si_code <= 0) repeats on return: raised here; a fault repeats on return. */
  if (signal == SIGABRT || signal == SIGTRAP || info->si_code <= 0) raise(signal);
}

/* Defined by the library of the "library" mode; null when the program is linked without it. */
extern void minidump_library_crash(void) __attribute__((weak));

__attribute__((noinline)) void minidump_crash_deep(int depth) {
  if (strcmp(mode, "abort") == 0) abort();
  volatile int *bad = (volatile int *)(uintptr_t)(0x20 + depth * 4);
  *bad = depth;
  __asm__ volatile("" ::: "memory");  /* no tail call: the chain stays on the stack */
}

__attribute__((noinline)) void minidump_crash_middle(int depth) {
  minidump_crash_deep(depth + 1);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static int minidump_compare(const void *a, const void *b) {
  minidump_crash_middle(1);
  return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) static void *minidump_reader(void *argument) {
  int index = (int)(long)argument;
  char name[16];
  snprintf(name, sizeof name, "md-reader-%d", (index + 1) % 10);
  pthread_setname_np(pthread_self(), name);
  atomic_store(&tids[index], (int)syscall(SYS_gettid));
  char byte;
  while (read(blocker[0], &byte, 1) < 0) {}
  return NULL;
}

__attribute__((noinline)) static void *minidump_sleeper(void *argument) {
  pthread_setname_np(pthread_self(), "md-sleeper");
  atomic_store(&tids[2], (int)syscall(SYS_gettid));
  struct timespec forever = {1000000, 0};
  for (;;) nanosleep(&forever, NULL);
  return argument;
}

/* True once /proc/self/task/TID/stat says the thread sleeps (state S): it is inside its system call. */
static int thread_sleeps(int tid) {
  char path[64], text[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  FILE *file = fopen(path, "r");
  if (!file) return 0;
  size_t count = fread(text, 1, sizeof text - 1, file);
  fclose(file);
  text[count] = 0;
  char *end = strrchr(text, ')');
  return end && end[1] == ' ' && end[2] == 'S';
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s HANDLER DATABASE [segv|abort|library|return|pause [HANDLER-ARGUMENT...]]\n", argv[0]);
    return 64;
  }
  handler_path = argv[1];
  snprintf(database_argument, sizeof database_argument, "--database=%s", argv[2]);
  if (argc > 3) mode = argv[3];
  int count = 0;
  handler_arguments[count++] = "crashpad_handler";
  handler_arguments[count++] = database_argument;
  handler_arguments[count++] = NULL;  /* the exception's address, filled in by the signal handler */
  handler_arguments[count++] = "--no-periodic-tasks";
  for (int i = 4; i < argc && count < 31; i++) handler_arguments[count++] = argv[i];
  handler_arguments[count] = NULL;
  /* Under Yama's ptrace_scope 1 only a named tracer may attach: the handler is a child, not a parent. */
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  pthread_setname_np(pthread_self(), "md-main");
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crash_signal;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, NULL);
  sigaction(SIGABRT, &action, NULL);
  sigaction(SIGILL, &action, NULL);
  sigaction(SIGTRAP, &action, NULL);
  if (pipe(blocker) != 0) return 1;
  pthread_t threads[3];
  pthread_create(&threads[0], NULL, minidump_reader, (void *)0L);
  pthread_create(&threads[1], NULL, minidump_reader, (void *)1L);
  pthread_create(&threads[2], NULL, minidump_sleeper, NULL);
  for (int i = 0; i < 3; i++) {
    while (atomic_load(&tids[i]) == 0 || !thread_sleeps(atomic_load(&tids[i]))) sched_yield();
  }
  printf("ready %d %d %d %d\n", (int)getpid(), atomic_load(&tids[0]), atomic_load(&tids[1]), atomic_load(&tids[2]));
  fflush(stdout);
  if (strcmp(mode, "return") == 0) return 0;
  if (strcmp(mode, "pause") == 0) for (;;) pause();
  if (strcmp(mode, "library") == 0) {
    if (!minidump_library_crash) return 2;
    minidump_library_crash();
    return 1;
  }
  int values[] = {3, 1, 2};
  qsort(values, 3, sizeof values[0], minidump_compare);
  return values[0];
}
