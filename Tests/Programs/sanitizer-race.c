/* Two threads write one counter: TSan's report has the two accesses and both threads' creation stacks. */
#include <pthread.h>
int counter;
__attribute__((noinline)) void bump(void) { counter++; }
static void *worker(void *arg) { bump(); return 0; }
int main(void) {
  pthread_t a, b;
  pthread_create(&a, 0, worker, 0);
  pthread_create(&b, 0, worker, 0);
  pthread_join(a, 0);
  pthread_join(b, 0);
  return 0;
}
