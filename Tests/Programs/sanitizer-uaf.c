/* A heap use-after-free on a second thread: ASan's report has four stacks (the access, freed by,
   allocated by, and the thread's creation). */
#include <pthread.h>
#include <stdlib.h>
__attribute__((noinline)) int *make(void) { return malloc(4 * sizeof(int)); }
__attribute__((noinline)) void drop(int *p) { free(p); }
__attribute__((noinline)) int use(int *p) { return p[1]; }
static void *worker(void *arg) {
  int *p = make();
  drop(p);
  return (void *)(long)use(p);
}
int main(void) {
  pthread_t thread;
  void *result;
  pthread_create(&thread, 0, worker, 0);
  pthread_join(thread, &result);
  return (int)(long)result;
}
