/* A multi-threaded program for the core-file tests, built without frame pointers (-O2
   -fomit-frame-pointer) so unwinding needs CFI. Three workers block in read(2) on a pipe nobody
   writes, each through its own chain of functions; the main thread says "ready" once all three are
   in it, then:
     sleep   blocks too (for gcore);
     crash   worker 2 writes through a bad pointer (SIGSEGV at address 0x10) after "ready";
     abort   the main thread calls abort(3) (SIGABRT, a signal without a fault address). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int blocker[2];
static atomic_int waiting;
static const char *mode = "sleep";

__attribute__((noinline)) static void crash_now(void) {
  volatile int *bad = (volatile int *)0x10;
  *bad = 1;
}

__attribute__((noinline)) void core_block_in_read(int worker) {
  char byte;
  atomic_fetch_add(&waiting, 1);
  if (worker == 2 && strcmp(mode, "crash") == 0) {
    while (atomic_load(&waiting) < 4) sched_yield();
    crash_now();
  }
  while (read(blocker[0], &byte, 1) < 0) {}
  __asm__ volatile("" ::: "memory");  /* no tail call: the chain stays on the stack */
}

__attribute__((noinline)) void core_worker_middle(int worker) {
  core_block_in_read(worker);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void *core_worker_start(void *argument) {
  int worker = (int)(long)argument;
  char name[16];
  snprintf(name, sizeof name, "worker-%d", worker);
  pthread_setname_np(pthread_self(), name);
  core_worker_middle(worker);
  return NULL;
}

__attribute__((noinline)) void core_main_wait(void) {
  char byte;
  if (strcmp(mode, "abort") == 0) abort();
  atomic_fetch_add(&waiting, 1);
  while (read(blocker[0], &byte, 1) < 0) {}
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  if (argc > 1) mode = argv[1];
  if (pipe(blocker) != 0) return 1;
  pthread_t threads[3];
  for (long i = 0; i < 3; i++) pthread_create(&threads[i], NULL, core_worker_start, (void *)(i + 1));
  while (atomic_load(&waiting) < 3) sched_yield();
  printf("ready\n");
  fflush(stdout);
  core_main_wait();
  return 0;
}
