/* A signed overflow on a thread: UBSan's stack (print_stacktrace=1) ends in libc's thread start, so
   with libc's debug file every frame is symbolized and none names a module. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
__attribute__((noinline)) int add(int a, int b) { return a + b; }
__attribute__((noinline)) int twice(int a) { return add(a, a); }
static void *worker(void *arg) { return (void *)(long)twice(INT_MAX - 1 + (int)(long)arg); }
int main(int argc, char **argv) {
  (void)argv;
  pthread_t thread;
  void *result;
  pthread_create(&thread, 0, worker, (void *)(long)argc);
  pthread_join(thread, &result);
  printf("%ld\n", (long)result);
  return 0;
}
