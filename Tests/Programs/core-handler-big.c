/* A process whose core is larger than the memory a core handler is given in its tests:
   `core-handler-big MIB [sleep|crash]` maps MIB mebibytes and writes every page (so the kernel and gcore
   dump them all), starts a named worker and waits until it is on its way into read(2) on a pipe nobody writes, prints "ready",
   then blocks in read(2) too (sleep, for gcore) or writes through a bad pointer three calls deep
   (crash: SIGSEGV at address 0x20). Built -O2 -fomit-frame-pointer: the frames need CFI. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int blocker[2];
static atomic_int waiting;

__attribute__((noinline)) static void big_block(void) {
  char byte;
  atomic_fetch_add(&waiting, 1);
  while (read(blocker[0], &byte, 1) < 0) {}
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void *big_worker(void *argument) {
  (void)argument;
  pthread_setname_np(pthread_self(), "big-worker");
  big_block();
  return NULL;
}

__attribute__((noinline)) static void big_crash(void) {
  volatile int *bad = (volatile int *)0x20;
  *bad = 1;
}

__attribute__((noinline)) static void big_middle(int crash) {
  if (crash) big_crash(); else big_block();
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  size_t size = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
  int crash = argc > 2 && strcmp(argv[2], "crash") == 0;
  unsigned char *memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED || pipe(blocker) != 0) return 1;
  for (size_t page = 0; page < size / 4096; page++) memset(memory + page * 4096, (int)(page & 0xFF) | 1, 4096);
  pthread_t worker;
  pthread_create(&worker, NULL, big_worker, NULL);
  while (atomic_load(&waiting) < 1) sched_yield();
  printf("ready\n");
  fflush(stdout);
  big_middle(crash);
  return 0;
}
