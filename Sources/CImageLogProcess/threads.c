#define _GNU_SOURCE
#include "CImageLogProcess.h"
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

/* Linux can put a new thread on the processor of the thread that made it, where it waits until its
   maker blocks or its time slice ends, with another processor idle (BENCHMARKS.md, "A worker thread's
   start while its maker works"): a worker started to run beside its maker would mostly run after it.
   So the thread is made allowed only on the other processors, which moves it to one before it first
   runs, and then allows itself every processor its maker was allowed, as a thread made the usual way
   would be. */

struct start {
  void *(*body)(void *);
  void *context;
  cpu_set_t allowed;
};

static void *begin(void *argument) {
  struct start start = *(struct start *)argument;
  free(argument);
  sched_setaffinity(0, sizeof start.allowed, &start.allowed);
  return start.body(start.context);
}

int il_start_thread(pthread_t *thread, void *(*body)(void *), void *context) {
  struct start *start = malloc(sizeof *start);
  int here = sched_getcpu();
  /* One processor, an unknown one, or more than cpu_set_t holds: made the usual way. */
  if (!start || here < 0 || here >= CPU_SETSIZE || sched_getaffinity(0, sizeof start->allowed, &start->allowed) != 0
      || !CPU_ISSET(here, &start->allowed) || CPU_COUNT(&start->allowed) < 2) {
    free(start);
    return pthread_create(thread, NULL, body, context);
  }
  start->body = body;
  start->context = context;
  cpu_set_t elsewhere = start->allowed;
  CPU_CLR(here, &elsewhere);
  pthread_attr_t attributes;
  int result = pthread_attr_init(&attributes);
  if (result == 0) {
    result = pthread_attr_setaffinity_np(&attributes, sizeof elsewhere, &elsewhere);
    if (result == 0) result = pthread_create(thread, &attributes, begin, start);
    pthread_attr_destroy(&attributes);
    if (result == 0) return 0;
  }
  free(start);
  return pthread_create(thread, NULL, body, context);
}

int il_processor_count(void) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) return CPU_COUNT(&allowed);
  long online = sysconf(_SC_NPROCESSORS_ONLN);  /* more processors than cpu_set_t holds */
  return online > 0 && online < 1 << 20 ? (int)online : 1;
}
