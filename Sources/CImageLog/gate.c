#include "CImageLog.h"
#include <pthread.h>

static pthread_mutex_t il_gate_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t il_gate_cond = PTHREAD_COND_INITIALIZER;
static uint64_t il_gate_delivered;
static __thread int il_delivering;

void il_gate_publish(uint64_t sequence) {
  pthread_mutex_lock(&il_gate_mutex);
  if (sequence > il_gate_delivered) il_gate_delivered = sequence;
  pthread_cond_broadcast(&il_gate_cond);
  pthread_mutex_unlock(&il_gate_mutex);
}

void il_gate_wait(uint64_t sequence) {
  pthread_mutex_lock(&il_gate_mutex);
  while (il_gate_delivered < sequence) pthread_cond_wait(&il_gate_cond, &il_gate_mutex);
  pthread_mutex_unlock(&il_gate_mutex);
}

void il_set_delivering(int delivering) { il_delivering = delivering; }

int il_is_delivering(void) { return il_delivering; }
