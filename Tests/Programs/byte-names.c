// A program whose names are bytes that are not UTF-8, for PathBytesTests: the main thread calls itself
// "m\xe9in" (PR_SET_NAME) and its worker "w\xe9rk\xff" (pthread_setname_np); both then wait in pause.
// It is built into a folder whose name holds a Latin-1 byte. Prints "ready" once both names are set.
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

static sem_t named;

static void *worker(void *unused) {
  (void)unused;
  pthread_setname_np(pthread_self(), "w\xe9rk\xff");
  sem_post(&named);
  for (;;) pause();
  return NULL;
}

int main(void) {
  pthread_t thread;
  sem_init(&named, 0, 0);
  prctl(PR_SET_NAME, "m\xe9in");
  if (pthread_create(&thread, NULL, worker, NULL) != 0) return 1;
  while (sem_wait(&named) != 0) {}
  puts("ready");
  fflush(stdout);
  for (;;) pause();
}
