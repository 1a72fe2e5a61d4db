/* A multi-threaded target for `imagelog pid --threads`: built with -O2 -fomit-frame-pointer, so its
   own frames are found by CFI alone. `process-threads N` starts N named threads, each blocked in a
   known call inside a known function (cycling: a read on a pipe, a nanosleep, a condition
   variable), prints "ready" once every one of them is on its way in, and blocks in pause().
   `process-threads N exit-main` ends its main thread with pthread_exit there instead, the others
   running on: its task becomes a zombie, and /proc/PID/maps, /proc/PID/exe and process_vm_readv(PID) no
   longer reach the process's memory, which the threads' own /proc/PID/task/TID entries still do. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int pipe_ends[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static atomic_int started;

/* noinline and the empty asm after each call: every function keeps its frame (no inlining, no tail
   call), so the stack is the same whoever unwinds it. */
__attribute__((noinline)) static void blocked_in_read(void) {
  char byte;
  if (read(pipe_ends[0], &byte, 1) < 0) perror("read");
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void blocked_in_sleep(void) {
  struct timespec pause = { 100000, 0 };
  while (nanosleep(&pause, &pause) != 0) {}
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void blocked_on_condition(void) {
  pthread_mutex_lock(&lock);
  for (;;) pthread_cond_wait(&never, &lock);
}

__attribute__((noinline)) static void *worker(void *argument) {
  long index = (long)argument;
  atomic_fetch_add(&started, 1);
  switch (index % 3) {
  case 0: blocked_in_read(); break;
  case 1: blocked_in_sleep(); break;
  default: blocked_on_condition(); break;
  }
  __asm__ volatile("" ::: "memory");
  return NULL;
}

__attribute__((noinline)) static void main_waits(void) {
  for (;;) pause();
}

int main(int argc, char **argv) {
  long count = argc > 1 ? strtol(argv[1], NULL, 10) : 3;
  if (pipe(pipe_ends) != 0) return 1;
  for (long i = 0; i < count; i++) {
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, 64 * 1024);
    pthread_t thread;
    if (pthread_create(&thread, &attributes, worker, (void *)i) != 0) return 1;
    const char *kinds[] = { "reader", "sleeper", "waiter" };
    char name[16];
    snprintf(name, sizeof name, "%s-%ld", kinds[i % 3], i);
    pthread_setname_np(thread, name);
  }
  while (atomic_load(&started) < count) sched_yield();
  printf("ready\n");
  fflush(stdout);
  if (argc > 2 && strcmp(argv[2], "exit-main") == 0) pthread_exit(NULL);
  main_waits();
  return 0;
}
