#include "CImageLog.h"
#include <pthread.h>
#include <stdatomic.h>

/* Waiters sleep on the condition; the deliverer publishes with one atomic store and takes the mutex
 * only when someone waits. Both sides use sequentially consistent operations (store delivered, then
 * load waiters; store waiters, then load delivered), so a waiter that registers while a publish
 * skips the broadcast sees the new value before it sleeps. */
static pthread_mutex_t il_gate_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t il_gate_cond = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t il_gate_delivered;
static _Atomic int il_gate_waiters;
static __thread int il_delivering;

void il_gate_publish(uint64_t sequence) {
  uint64_t current = atomic_load(&il_gate_delivered);
  while (current < sequence && !atomic_compare_exchange_weak(&il_gate_delivered, &current, sequence)) {}
  if (atomic_load(&il_gate_waiters) > 0) {
    pthread_mutex_lock(&il_gate_mutex);
    pthread_cond_broadcast(&il_gate_cond);
    pthread_mutex_unlock(&il_gate_mutex);
  }
}

void il_gate_wait(uint64_t sequence) {
  if (atomic_load(&il_gate_delivered) >= sequence) return;
  pthread_mutex_lock(&il_gate_mutex);
  atomic_fetch_add(&il_gate_waiters, 1);
  while (atomic_load(&il_gate_delivered) < sequence) pthread_cond_wait(&il_gate_cond, &il_gate_mutex);
  atomic_fetch_sub(&il_gate_waiters, 1);
  pthread_mutex_unlock(&il_gate_mutex);
}

void il_set_delivering(int delivering) { il_delivering = delivering; }

int il_is_delivering(void) { return il_delivering; }
