/* A process whose main thread calls pthread_exit while its other threads run on: the main thread's task
   becomes a zombie, and /proc/PID/maps, /proc/PID/exe and process_vm_readv(PID) no longer reach the
   process's memory, which the threads' own /proc/PID/task/TID entries still do. Built with -O2
   -fomit-frame-pointer, so its frames are found by CFI alone. `process-main-exited N` starts N named
   threads, each blocked in a known call inside a known function (cycling: a read on a pipe, pause,
   a nanosleep), prints "ready" once every one is on its way in, and ends its main thread. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int pipe_ends[2];
static atomic_int started;

/* noinline and the empty asm after each call: every function keeps its frame (no inlining, no tail
   call), so the stack is the same whoever unwinds it. */
__attribute__((noinline)) static void waits_in_read(void) {
  char byte;
  if (read(pipe_ends[0], &byte, 1) < 0) perror("read");
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void waits_in_pause(void) {
  for (;;) pause();
}

__attribute__((noinline)) static void waits_in_sleep(void) {
  struct timespec pause = { 100000, 0 };
  while (nanosleep(&pause, &pause) != 0) {}
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void *worker(void *argument) {
  long index = (long)argument;
  atomic_fetch_add(&started, 1);
  switch (index % 3) {
  case 0: waits_in_read(); break;
  case 1: waits_in_pause(); break;
  default: waits_in_sleep(); break;
  }
  __asm__ volatile("" ::: "memory");
  return NULL;
}

int main(int argc, char **argv) {
  long count = argc > 1 ? strtol(argv[1], NULL, 10) : 3;
  if (pipe(pipe_ends) != 0) return 1;
  for (long i = 0; i < count; i++) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, (void *)i) != 0) return 1;
    char name[16];
    snprintf(name, sizeof name, "worker-%ld", i);
    pthread_setname_np(thread, name);
  }
  while (atomic_load(&started) < count) sched_yield();
  printf("ready\n");
  fflush(stdout);
  pthread_exit(NULL);
}
