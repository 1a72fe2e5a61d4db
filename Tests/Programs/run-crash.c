/* A program that crashes under `imagelog run --crash-dir` (RunCrashTests), with no crash handler of
   its own unless a mode says so. Built at test time with
     cc -g -O0 -pthread Tests/Programs/run-crash.c -o run-crash -ldl
   Usage: run-crash MODE THREADS-FILE
   capture    a worker named "sorter" sorts with qsort, whose comparator calls the library of
              $CRASH_LIBRARY (crash-threads-lib.c, gcc -O2 -fomit-frame-pointer), which crashes three
              calls deep; beside it "spinner" blocks every signal and spins, "sleeper" waits in
              read(2), and the main thread in pthread_join. "tid name" of each thread goes to
              THREADS-FILE just before the crash.
   null       a null dereference on the main thread.
   stack      the main thread overflows its stack.
   handler    installs its own SIGSEGV handler (it prints and exits 42), then crashes: a handler the
              program installs replaces imagelog's.
   seccomp    forbids ptrace(2) to itself and its children with a seccomp filter, then crashes: the
              helper cannot stop the threads, and the module writes its own report.
   ignorechld, handlechld  SIGCHLD ignored, or handled by a reaper (waitpid(-1)), then null.
   vfork      a vfork child crashes before it executes anything; then the parent crashes.
   nofile     lowers RLIMIT_NOFILE to 3 (no descriptor left to open), then null.
   unloaded   opens the plugin $CRASH_PLUGIN (unloaded-plugin.c), closes it, then calls its plugin_work
              through the pointer it kept: the pc is in no mapped image. Prints "plugin_work 0x...".
              With $CRASH_FORBID_PTRACE, first as seccomp does: the module writes the report. With
              $CRASH_OTHER (unloaded-other.c), that library is opened first, mapped where the plugin
              was: the call traps in it.
   timeline   opens $CRASH_PLUGIN then $CRASH_OTHER, closes them in the same order, prints "bases 0x... 0x..."
              (where each was mapped), then null: the report's Image Timeline has the four events.
   unloaded-thread  the plugin starts a thread (plugin_start_thread) waiting in read(2) inside its
              plugin_thread, is closed, then the read is answered: the thread returns into unmapped
              memory. Prints "plugin_thread 0x...".
   forkcrash  the main thread crashes while a second thread waits until the crash helper (a stand-in
              the test names, which holds the handler until told) has started, forks a child that
              crashes at once, reaps it, writes "PID STATUS" of it to $HELD_DIR/child and tells the
              stand-in ($HELD_DIR/release) to end. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test-threads.h"

static const char *threads_path;
static int never_written[2];
static atomic_int started;
static pid_t sleeper_tid;

__attribute__((noinline)) static void crash_null(void) {
  volatile int *volatile pointer = NULL;
  *pointer = 42;
}

__attribute__((noinline)) static int recurse(int depth) {
  volatile char pad[512];
  pad[0] = (char)depth;
  return recurse(depth + 1) + pad[0];
}

static void *sleeper(void *unused) {
  (void)unused;
  pthread_setname_np(pthread_self(), "sleeper");
  sleeper_tid = gettid();
  atomic_fetch_add(&started, 1);
  char byte;
  while (read(never_written[0], &byte, 1) != 0) {}
  return NULL;
}

static void *spinner(void *unused) {
  (void)unused;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  pthread_setname_np(pthread_self(), "spinner");
  atomic_fetch_add(&started, 1);
  for (volatile unsigned long turns = 0;; turns++) {}
  return NULL;
}

static int (*library_entry)(volatile int *, int);

__attribute__((noinline)) static int call_library(void) {
  test_write_thread_list(threads_path);
  int result = library_entry(NULL, 1);
  __asm__ volatile("" ::: "memory");
  return result + 1;
}

static int compare(const void *a, const void *b) {
  if (*(const int *)a == 7 || *(const int *)b == 7) call_library();
  return *(const int *)a - *(const int *)b;
}

static void *sorter(void *unused) {
  (void)unused;
  pthread_setname_np(pthread_self(), "sorter");
  int values[16];
  for (int i = 0; i < 16; i++) values[i] = 15 - i;
  while (!test_thread_asleep(sleeper_tid) || !test_thread_asleep(getpid())) sched_yield();
  qsort(values, 16, sizeof *values, compare);
  return NULL;
}

static void own_handler(int signal) {
  (void)signal;
  static const char text[] = "run-crash: its own handler ran\n";
  write(2, text, sizeof text - 1);
  _exit(42);
}

static void reap(int signal) {
  (void)signal;
  while (waitpid(-1, NULL, WNOHANG | __WALL) > 0) {}
}

static void forbid_ptrace(void) {
  struct sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    perror("run-crash: seccomp");
    exit(1);
  }
}

static void held_path(char *path, size_t size, const char *name) {
  const char *directory = getenv("HELD_DIR");
  snprintf(path, size, "%s/%s", directory != NULL ? directory : ".", name);
}

static void *forker(void *unused) {
  (void)unused;
  char started_path[4096], child_path[4096], release_path[4096];
  held_path(started_path, sizeof started_path, "started");
  held_path(child_path, sizeof child_path, "child");
  held_path(release_path, sizeof release_path, "release");
  struct stat info;
  while (stat(started_path, &info) != 0) {
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  pid_t child = fork();
  if (child == 0) crash_null();
  int status = 0;
  waitpid(child, &status, 0);
  FILE *file = fopen(child_path, "w");
  fprintf(file, "%d %d\n", (int)child, status);
  fclose(file);
  fclose(fopen(release_path, "w"));
  for (;;) pause();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODE THREADS-FILE\n", argv[0]);
    return 64;
  }
  const char *mode = argv[1];
  threads_path = argv[2];
  if (strcmp(mode, "capture") == 0) {
    const char *path = getenv("CRASH_LIBRARY");
    void *handle = path != NULL ? dlopen(path, RTLD_NOW) : NULL;
    library_entry = handle != NULL ? (int (*)(volatile int *, int))dlsym(handle, "crash_library_entry") : NULL;
    if (library_entry == NULL || pipe(never_written) != 0) {
      fprintf(stderr, "run-crash: cannot load CRASH_LIBRARY\n");
      return 1;
    }
    pthread_t thread;
    pthread_create(&thread, NULL, sleeper, NULL);
    pthread_create(&thread, NULL, spinner, NULL);
    while (atomic_load(&started) < 2) sched_yield();
    pthread_create(&thread, NULL, sorter, NULL);
    pthread_join(thread, NULL);
    return 0;
  }
  if (strcmp(mode, "unloaded-thread") == 0) {
    /* The plugin $CRASH_PLUGIN starts a thread and is closed; the thread reads on, into unmapped code. */
    const char *path = getenv("CRASH_PLUGIN");
    void *handle = path != NULL ? dlopen(path, RTLD_NOW) : NULL;
    int (*start)(int, int) = handle != NULL ? (int (*)(int, int))dlsym(handle, "plugin_start_thread") : NULL;
    void *thread_function = handle != NULL ? dlsym(handle, "plugin_thread") : NULL;
    int ends[2], ready[2];
    char byte;
    if (start == NULL || thread_function == NULL || pipe(ends) != 0 || pipe(ready) != 0 || start(ends[0], ready[1]) != 0
        || read(ready[0], &byte, 1) != 1) {
      fprintf(stderr, "run-crash: cannot start CRASH_PLUGIN's thread\n");
      return 1;
    }
    dlclose(handle);
    printf("plugin_thread %p\n", thread_function);
    fflush(stdout);
    if (write(ends[1], "x", 1) != 1) return 4;
    for (;;) pause();
  }
  if (strcmp(mode, "timeline") == 0) {
    const char *paths[2] = {getenv("CRASH_PLUGIN"), getenv("CRASH_OTHER")};
    const char *symbols[2] = {"plugin_work", "other_traps"};
    void *handles[2];
    Dl_info where[2];
    for (int i = 0; i < 2; i++) {
      handles[i] = paths[i] != NULL ? dlopen(paths[i], RTLD_NOW) : NULL;
      void *symbol = handles[i] != NULL ? dlsym(handles[i], symbols[i]) : NULL;
      if (symbol == NULL || dladdr(symbol, &where[i]) == 0) {
        fprintf(stderr, "run-crash: cannot load CRASH_PLUGIN and CRASH_OTHER\n");
        return 1;
      }
    }
    dlclose(handles[0]);
    dlclose(handles[1]);
    printf("bases %p %p\n", where[0].dli_fbase, where[1].dli_fbase);
    fflush(stdout);
    crash_null();
  }
  if (strcmp(mode, "unloaded") == 0) {
    /* The plugin $CRASH_PLUGIN (unloaded-plugin.c) opened, closed, then called. */
    const char *path = getenv("CRASH_PLUGIN");
    void *handle = path != NULL ? dlopen(path, RTLD_NOW) : NULL;
    int (*volatile work)(int) = handle != NULL ? (int (*)(int))dlsym(handle, "plugin_work") : NULL;
    if (work == NULL) {
      fprintf(stderr, "run-crash: cannot load CRASH_PLUGIN\n");
      return 1;
    }
    dlclose(handle);
    if (getenv("CRASH_FORBID_PTRACE") != NULL) forbid_ptrace();  /* the module then writes the report */
    const char *other = getenv("CRASH_OTHER");
    if (other != NULL) {
      /* Another library mapped where the plugin was: the call traps in it. */
      Dl_info where;
      if (dlopen(other, RTLD_NOW) == NULL || dladdr((void *)work, &where) == 0 || where.dli_fname == NULL ||
          strcmp(where.dli_fname, other) != 0) {
        fprintf(stderr, "run-crash: CRASH_OTHER was not mapped where the plugin was\n");
        return 3;
      }
    }
    printf("plugin_work %p\n", (void *)work);
    fflush(stdout);
    return work(1);
  }
  if (strcmp(mode, "stack") == 0) return recurse(0);
  if (strcmp(mode, "vfork") == 0) {
    pid_t child = vfork();
    if (child == 0) crash_null();
    waitpid(child, NULL, 0);
  }
  if (strcmp(mode, "nofile") == 0) {
    struct rlimit limit = {3, 3};
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      perror("run-crash: setrlimit");
      return 1;
    }
  }
  if (strcmp(mode, "forkcrash") == 0) {
    pthread_t thread;
    pthread_create(&thread, NULL, forker, NULL);
  }
  if (strcmp(mode, "handler") == 0) signal(SIGSEGV, own_handler);
  if (strcmp(mode, "seccomp") == 0) forbid_ptrace();
  if (strcmp(mode, "ignorechld") == 0) signal(SIGCHLD, SIG_IGN);
  if (strcmp(mode, "handlechld") == 0) signal(SIGCHLD, reap);
  crash_null();
  return 0;
}
