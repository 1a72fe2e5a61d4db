/* Every thread. The reporting thread (the one that crashed) lists /proc/self/task with
   getdents64 and sends each other thread a real-time signal (rt_tgsigqueueinfo, the thread's slot
   index and the report's generation in si_value) whose handler is installed only for the report
   and the previous action put back afterwards. Each thread then unwinds ITSELF, from the context
   the signal interrupted, into a slot mapped at install time (fixed capacity: threads beyond it
   are listed by tid, not unwound), publishes "done" with an atomic and a futex wake, and waits
   (futex, at most IL_RELEASE_BUDGET_MS) until the report is written, so no thread exits the process
   or frees what the report reads meanwhile. The reporting thread waits for the answers (futex on the
   answer count, no sleeping) IL_ANSWER_BUDGET_MS, and past that only while a thread that has not
   answered is still runnable (on a loaded machine it may not have been scheduled yet), up to
   IL_ANSWER_LIMIT_MS; a thread that did not answer is listed as such.
   Why this and not the alternatives:
   - Unwinding in the thread itself needs no stopped stack to be read from outside (the thread
     cannot move while it runs its own handler), runs on both cores at once, and needs no ptrace
     permission: a helper that ptraces the threads (Breakpad) needs a fork, PR_SET_PTRACER and
     Yama's consent, and fails under many container seccomp profiles.
   - No locks are taken anywhere, so a thread that holds one (malloc's, the loader's) answers
     like any other; the handlers only read memory through crash_memory.c's reader.
   - A thread that blocks the signal (SigBlk in /proc/self/task/TID/status) is asked with SIGPROF,
     SIGUSR2 or SIGUSR1, whichever it leaves open (libdispatch's workers leave SIGPROF). One that
     blocks them all and sleeps (sigwait) is not waited for and is listed as blocking them; one that
     runs may be about to unblock them (glibc's pthread_create blocks every signal around clone).
   - The signal: Swift's backtracer suspends threads with SIGUSR1, SIGUSR2 or SIGPROF, glibc keeps
     32 and 33, Valgrind takes SIGRTMAX and applications take real-time signals from SIGRTMIN up;
     SIGRTMAX - 2 collides with none. After the report SIG_IGN discards the instances still pending
     (a thread that never unblocked it), so the previous action (usually SIG_DFL: terminate) never
     sees one, and a late handler checks the generation and returns.
   - A second crash: on the reporting thread, the crash signals are blocked in its handler, so the
     kernel kills the process by that signal at once (no hang); on a thread answering, the crash
     handler runs there (the capture handler leaves crash signals unblocked) and waits for the
     report, which lists that thread as not answered. The reporting thread then puts back the
     previous handlers and re-raises: the process dies by its original signal, and Swift's
     backtracer (installed before us) runs after us and suspends the threads with its own signals. */
#define _GNU_SOURCE
#include "crash_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

enum { SLOT_REQUESTED = 1, SLOT_WRITING, SLOT_DONE, SLOT_CLOSED };

static il_thread_slot *thread_slots;           /* IL_THREAD_SLOTS of them, mapped at install */
pid_t il_crash_overflow_tids[IL_OVERFLOW_TIDS];
int il_crash_capture_signal;                          /* chosen at install */
static struct sigaction capture_previous;
static _Atomic int capturing;                  /* a report is asking the other threads */
static il_kept_file kept_tasks = {-1, 0, 0, 0}; /* /proc/self/task from install (il_helper_keep) */
static _Atomic uint32_t capture_generation;    /* which report a capture signal belongs to */
static _Atomic uint32_t answered;              /* futex word: answers so far */
static _Atomic uint32_t released_generation;   /* futex word: the last report that let its threads go */
static _Atomic uint32_t departed;              /* futex word: answered threads that left the handler */

static long futex(_Atomic uint32_t *word, int operation, uint32_t value, const struct timespec *timeout) {
  return syscall(SYS_futex, (uint32_t *)word, operation, value, timeout, NULL, 0);
}

static uint64_t now_ns(void) {
  struct timespec now = {0, 0};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static struct timespec until(uint64_t deadline) {
  uint64_t now = now_ns(), left = deadline > now ? deadline - now : 0;
  return (struct timespec){(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
}

/* The capture signal's handler, on a thread the reporting thread asked: it unwinds itself from the
   context the signal interrupted (its stack cannot move meanwhile), says so, and stays here until
   the report is written (bounded), so no thread runs on (exits the process, frees what a report
   reads) while it is written. */
static void capture_handler(int signal, siginfo_t *info, void *context) {
  (void)signal;
  int saved_errno = errno;
  uint32_t generation = atomic_load(&capture_generation);
  if (info == NULL || info->si_code != SI_QUEUE || info->si_pid != (pid_t)syscall(SYS_getpid) ||
      thread_slots == NULL || (uint32_t)info->si_value.sival_int >> 16 != (generation & 0x7fff)) {
    errno = saved_errno;
    return;  /* not ours, or late for an earlier report */
  }
  int index = info->si_value.sival_int & 0xffff;
  il_thread_slot *slot = &thread_slots[index < IL_THREAD_SLOTS ? index : 0];
  int expected = SLOT_REQUESTED;
  if (index >= IL_THREAD_SLOTS || slot->tid != (pid_t)syscall(SYS_gettid) ||
      !atomic_compare_exchange_strong(&slot->state, &expected, SLOT_WRITING)) {
    errno = saved_errno;
    return;
  }
  int held;
  il_reader reader = {il_crash_table_acquire(&held), 0, 0};
  il_crash_unwind_context(&reader, context, slot);
  il_crash_table_release(held);
  atomic_store(&slot->state, SLOT_DONE);
  atomic_fetch_add(&answered, 1);
  futex(&answered, FUTEX_WAKE_PRIVATE, 1, NULL);
  uint64_t deadline = now_ns() + (uint64_t)IL_RELEASE_BUDGET_MS * 1000000u;
  for (uint32_t seen; (seen = atomic_load(&released_generation)) != generation && now_ns() < deadline;) {
    struct timespec left = until(deadline);
    futex(&released_generation, FUTEX_WAIT_PRIVATE, seen, &left);
  }
  /* The interrupted code's mask back before saying so: the next handler (Swift's backtracer) reads
     SigBlk to pick the signal it suspends this thread with, and ours blocks nearly all. */
  if (context != NULL) syscall(SYS_rt_sigprocmask, SIG_SETMASK, &((const ucontext_t *)context)->uc_sigmask, NULL, 8);
  atomic_fetch_add(&departed, 1);
  futex(&departed, FUTEX_WAKE_PRIVATE, 1, NULL);
  errno = saved_errno;
}

/* The signals thread `tid` blocks (SigBlk in its status); 0 when it cannot be read. */
static uint64_t thread_blocked_signals(pid_t tid) {
  char path[64], status[4096];
  il_crash_task_path(path, tid, "status");
  ssize_t length = il_crash_read_small_file(path, status, sizeof status);
  if (length <= 0) return 0;
  const char *line = NULL;
  for (ssize_t i = 0; i + 8 <= length; i++)
    if ((i == 0 || status[i - 1] == '\n') && memcmp(status + i, "SigBlk:", 7) == 0) {
      line = status + i + 7;
      break;
    }
  if (line == NULL) return 0;
  while (*line == '\t' || *line == ' ') line++;
  uint64_t mask = 0;
  for (; *line != '\0' && *line != '\n'; line++) {
    char c = *line;
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return 0;
    mask = mask << 4 | (uint64_t)digit;
  }
  return mask;
}

static int blocks(uint64_t mask, int signal) { return signal >= 1 && signal <= 64 && ((mask >> (signal - 1)) & 1); }

/* The state letter of thread `tid` (R, S, D, ...) from its stat; 0 when it cannot be read. */
static char thread_state(pid_t tid) {
  char path[64], stat[512];
  il_crash_task_path(path, tid, "stat");
  ssize_t length = il_crash_read_small_file(path, stat, sizeof stat);
  for (ssize_t i = length - 1; i > 0; i--)  /* after the last ')': the name may hold one */
    if (stat[i] == ')') return i + 2 < length ? stat[i + 2] : 0;
  return 0;
}

/* When a thread blocks the capture signal, the first of these it leaves open asks it instead:
   libdispatch's workers (Swift's concurrency pool) block every signal but the synchronous ones and
   SIGPROF, which it leaves to profilers. Their handlers are swapped in only for such a thread, only
   while the report asks, as Swift's backtracer does with the same three. */
static const int fallback_signals[3] = {SIGPROF, SIGUSR2, SIGUSR1};
static struct sigaction fallback_previous[3];

static int blocks_all(uint64_t mask) {
  return blocks(mask, il_crash_capture_signal) && blocks(mask, fallback_signals[0]) &&
         blocks(mask, fallback_signals[1]) && blocks(mask, fallback_signals[2]);
}

/* What a report knows of the process's threads. */
struct il_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/* Whether a thread not yet done may still answer: one unwinding now, one runnable (state R: not yet
   scheduled on a loaded machine, or about to unblock the signal), or, within the budget, any that
   does not sleep blocking every asking signal. */
static int can_still_answer(const il_capture *capture, int past_budget) {
  for (int i = 0; i < capture->count; i++) {
    il_thread_slot *slot = &capture->slots[i];
    int state = atomic_load(&slot->state);
    if (state == SLOT_WRITING) return 1;
    if (state != SLOT_REQUESTED) continue;
    char run_state = thread_state(slot->tid);
    if (run_state == 'R') return 1;
    if (!past_budget && !(run_state == 'S' && blocks_all(thread_blocked_signals(slot->tid)))) return 1;
  }
  return 0;
}

/* Lists the threads, asks each other one to unwind itself, unwinds this one, and waits (at most
   IL_ANSWER_BUDGET_MS in all) for the answers. Without the install-time slots, or while another
   report is asking, only this thread is reported (in `single`). */
void il_crash_begin_capture(il_capture *capture, il_thread_slot *single, il_reader *reader, const void *context) {
  pid_t pid = (pid_t)syscall(SYS_getpid), self = (pid_t)syscall(SYS_gettid);
  uint64_t started = now_ns(), deadline = started + (uint64_t)IL_ANSWER_BUDGET_MS * 1000000u,
           limit = started + (uint64_t)IL_ANSWER_LIMIT_MS * 1000000u;
  memset(capture, 0, sizeof *capture);
  int expected = 0;
  int fd = -1;
  if (thread_slots != NULL && il_crash_capture_signal > 0 && atomic_compare_exchange_strong(&capturing, &expected, 1)) {
    fd = il_helper_kept(&kept_tasks);
    if (fd >= 0) syscall(SYS_lseek, fd, 0, SEEK_SET);
    else {
      do fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      while (fd < 0 && errno == EINTR);
    }
    if (fd < 0) atomic_store(&capturing, 0);
  }
  if (fd < 0) {
    capture->slots = single;
    capture->count = 1;
    single->tid = self;
    single->outcome = OUTCOME_CRASHED;
    il_crash_unwind_context(reader, context, single);
    return;
  }
  capture->slots = thread_slots;
  capture->asked = 1;
  capture->generation = atomic_fetch_add(&capture_generation, 1) + 1;
  atomic_store(&answered, 0);
  atomic_store(&departed, 0);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = capture_handler;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigfillset(&action.sa_mask);  /* but a fault while answering still reaches the crash handler */
  for (int i = 0; i < IL_CRASH_SIGNAL_COUNT; i++) sigdelset(&action.sa_mask, il_crash_signals[i]);
  sigaction(il_crash_capture_signal, &action, &capture_previous);

  /* getdents64 rather than readdir: no allocation, no lock. Each thread is asked as soon as it is
     found, so they unwind while the list is still being read. */
  _Alignas(8) char entries[2048];
  int asked = 0;
  for (;;) {
    long n = syscall(SYS_getdents64, fd, entries, sizeof entries);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      struct il_dirent64 *entry = (struct il_dirent64 *)(entries + at);
      at += entry->d_reclen;
      pid_t tid = 0;
      const char *c = entry->d_name;
      if (*c < '0' || *c > '9') continue;
      for (; *c >= '0' && *c <= '9'; c++) tid = tid * 10 + (*c - '0');
      if (capture->count == IL_THREAD_SLOTS) {
        if (capture->overflow < IL_OVERFLOW_TIDS) il_crash_overflow_tids[capture->overflow++] = tid;
        else capture->unlisted++;
        continue;
      }
      il_thread_slot *slot = &thread_slots[capture->count];
      slot->tid = tid;
      slot->frame_count = 0;
      if (tid == self) {
        capture->crashed = capture->count++;
        slot->outcome = OUTCOME_CRASHED;
        atomic_store(&slot->state, SLOT_CLOSED);
        continue;
      }
      atomic_store(&slot->state, SLOT_REQUESTED);
      siginfo_t info;
      memset(&info, 0, sizeof info);
      info.si_signo = il_crash_capture_signal;
      info.si_code = SI_QUEUE;
      info.si_pid = pid;
      info.si_uid = getuid();
      info.si_value.sival_int = (int)((capture->generation & 0x7fff) << 16 | (uint32_t)capture->count);
      if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, il_crash_capture_signal, &info) == 0) {
        asked++;
      } else {
        atomic_store(&slot->state, SLOT_CLOSED);
        slot->outcome = OUTCOME_GONE;
      }
      capture->count++;
    }
  }
  if (fd != kept_tasks.fd) close(fd);
  il_thread_slot *own = NULL;
  if (capture->slots[capture->crashed].tid == self) {
    own = &capture->slots[capture->crashed];
  } else if (capture->count < IL_THREAD_SLOTS) {  /* not listed (no /proc/self/task entry?): last */
    capture->crashed = capture->count++;
    own = &thread_slots[capture->crashed];
    own->tid = self;
    own->outcome = OUTCOME_CRASHED;
    atomic_store(&own->state, SLOT_CLOSED);
  } else {
    own = single;
    capture->crashed = -1;
  }
  il_crash_unwind_context(reader, context, own);

  /* A thread that blocks the capture signal is asked with the first fallback signal it leaves open.
     One that blocks them all answers only once it unblocks one: inside pthread_create (glibc blocks
     every signal around clone) that is soon, in a thread asleep in sigwait never. Once the others
     have answered (or the budget is spent), waiting goes on only while can_still_answer. */
  int blocked = 0, fallback_installed[3] = {0, 0, 0};
  for (int i = 0; i < capture->count; i++) {
    il_thread_slot *slot = &capture->slots[i];
    if (atomic_load(&slot->state) != SLOT_REQUESTED) continue;
    uint64_t mask = thread_blocked_signals(slot->tid);
    if (!blocks(mask, il_crash_capture_signal)) continue;
    int k = 0;
    while (k < 3 && blocks(mask, fallback_signals[k])) k++;
    if (k < 3) {
      if (!fallback_installed[k]) sigaction(fallback_signals[k], &action, &fallback_previous[k]);
      fallback_installed[k] = 1;
      siginfo_t info;
      memset(&info, 0, sizeof info);
      info.si_signo = fallback_signals[k];
      info.si_code = SI_QUEUE;
      info.si_pid = pid;
      info.si_uid = getuid();
      info.si_value.sival_int = (int)((capture->generation & 0x7fff) << 16 | (uint32_t)i);
      if (syscall(SYS_rt_tgsigqueueinfo, pid, slot->tid, fallback_signals[k], &info) == 0) continue;
    }
    blocked++;
  }
  for (;;) {
    uint32_t seen = atomic_load(&answered);
    uint64_t now = now_ns();
    if (seen >= (uint32_t)asked || now >= limit) break;
    if ((seen >= (uint32_t)(asked - blocked) || now >= deadline) && !can_still_answer(capture, now >= deadline)) break;
    uint64_t end = now + 5000000u < limit ? now + 5000000u : limit;
    struct timespec left = until(end);
    futex(&answered, FUTEX_WAIT_PRIVATE, seen, &left);
  }
  capture->waited_ms = (now_ns() - started) / 1000000u;
  for (int i = 0; i < capture->count; i++) {
    il_thread_slot *slot = &capture->slots[i];
    int state = SLOT_REQUESTED;
    if (atomic_compare_exchange_strong(&slot->state, &state, SLOT_CLOSED))
      slot->outcome = blocks_all(thread_blocked_signals(slot->tid)) && thread_state(slot->tid) == 'S' ? OUTCOME_BLOCKED
                                                                                                    : OUTCOME_SILENT;
    else if (state == SLOT_WRITING)
      slot->outcome = OUTCOME_SILENT;
    else if (state == SLOT_DONE)
      slot->outcome = OUTCOME_UNWOUND;
  }
  /* SIG_IGN first: it discards the signals still pending (a thread that blocks it, one that did not
     get to run), so none is later taken by the previous action (for most, SIG_DFL: termination). */
  struct sigaction ignore;
  memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  sigaction(il_crash_capture_signal, &ignore, NULL);
  sigaction(il_crash_capture_signal, &capture_previous, NULL);
  for (int k = 0; k < 3; k++) {
    if (!fallback_installed[k]) continue;
    sigaction(fallback_signals[k], &ignore, NULL);
    sigaction(fallback_signals[k], &fallback_previous[k], NULL);
  }
}

/* Lets the answered threads go, and waits (IL_ANSWER_BUDGET_MS at most) until they have left the
   handler: the next handler (Swift's backtracer) reads their signal masks to suspend them, and
   inside ours they block every signal. */
void il_crash_end_capture(il_capture *capture) {
  if (!capture->asked) return;
  uint32_t answers = atomic_load(&answered);
  atomic_store(&released_generation, capture->generation);
  futex(&released_generation, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
  uint64_t deadline = now_ns() + (uint64_t)IL_ANSWER_BUDGET_MS * 1000000u;
  for (uint32_t seen; (seen = atomic_load(&departed)) < answers && now_ns() < deadline;) {
    struct timespec left = until(deadline);
    futex(&departed, FUTEX_WAIT_PRIVATE, seen, &left);
  }
  atomic_store(&capturing, 0);
}

/* The slots the other threads answer into, mapped once (pages are touched only by a report). */
int il_crash_prepare_capture(void) {
  if (thread_slots == NULL) {
    void *memory = mmap(NULL, IL_THREAD_SLOTS * sizeof(il_thread_slot), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) return errno;
    thread_slots = memory;
  }
  /* Swift's backtracer suspends threads with SIGUSR1, SIGUSR2 or SIGPROF (whichever the thread does
     not block), glibc keeps 32 and 33 below SIGRTMIN, Valgrind takes SIGRTMAX and applications take
     real-time signals from SIGRTMIN up: SIGRTMAX - 2 collides with none of them, and it is ours only
     while a report is asking. */
  il_crash_capture_signal = SIGRTMAX - 2;
  if (kept_tasks.fd < 0)
    il_helper_keep(&kept_tasks, IL_SYS(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return 0;
}
