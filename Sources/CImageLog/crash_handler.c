/* The signal handler and its installation. The handler claims the report for the first thread that
   crashes; with a helper laid out (crash_helper.c) it starts imagelog to capture the process from
   outside, and writes the report itself (crash_report.c) only when the helper wrote none; then it puts
   back the handlers it found and re-raises, so the process dies by its own signal and the next handler
   (Swift's backtracer, a debugger's) still runs.
   Installing maps what the report needs (crash_memory.c, crash_threads.c) and gives threads the
   alternate signal stacks a stack overflow needs. */
#define _GNU_SOURCE
#include "crash_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

const int il_crash_signals[IL_CRASH_SIGNAL_COUNT] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
static struct sigaction previous_actions[IL_CRASH_SIGNAL_COUNT];
static _Atomic int installed;
static _Atomic int report_fd = -1;
static uint64_t reporting;                 /* who writes a report: il_helper_claim's word (atomic builtins) */
static int handled_pid;                    /* the process whose reporting thread has restored the handlers */
static pthread_mutex_t install_mutex = PTHREAD_MUTEX_INITIALIZER;

/* ---- the handler ---- */

static void restore_previous_actions(void) {
  for (int i = 0; i < IL_CRASH_SIGNAL_COUNT; i++) sigaction(il_crash_signals[i], &previous_actions[i], NULL);
}

static void pause_briefly(void) {
  struct timespec delay = {0, 10 * 1000 * 1000};
  nanosleep(&delay, NULL);
}

/* Sends `signal` again to this thread with the same siginfo, so the restored handler sees what we
   saw. Blocked while we run; delivered when the handler returns. */
static void reraise(int signal, siginfo_t *info) {
  pid_t pid = (pid_t)syscall(SYS_getpid), tid = (pid_t)syscall(SYS_gettid);
  if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, signal, info) != 0) syscall(SYS_tgkill, pid, tid, signal);
}

/* What the thread that claimed the crash does before the previous handlers get it back: everything
   here runs on the crashed thread, inside the handler. */
static void report_crash(int signal, siginfo_t *info, void *context) {
  /* SIGPIPE is blocked while we run (sa_mask): a report descriptor that is a pipe nobody reads
     fails with EPIPE instead of killing the process by SIGPIPE. The SIGPIPE that write raised
     is taken back, so the process still dies by its own signal. */
  sigset_t pending_before;
  int had_sigpipe = sigpending(&pending_before) == 0 && sigismember(&pending_before, SIGPIPE) == 1;
  if (il_crash_helper_capture(signal, info, context)) return;
  int fd = atomic_load(&report_fd);
  if (fd >= 0) {
    il_crash_write_report(fd, signal, info, context);
  } else if ((fd = il_crash_helper_open_fallback()) >= 0) {
    il_crash_write_report(fd, signal, info, context);
    il_crash_helper_close_fallback(fd);
  }
  if (!had_sigpipe) {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    struct timespec no_wait = {0, 0};
    syscall(SYS_rt_sigtimedwait, &pipe_only, NULL, &no_wait, sizeof(uint64_t));
  }
}

static void crash_handler(int signal, siginfo_t *info, void *context) {
  int saved_errno = errno;
  pid_t pid = (pid_t)syscall(SYS_getpid), self = (pid_t)syscall(SYS_gettid);
  int claim = il_helper_claim(&reporting, pid, self);
  if (claim == IL_CLAIM_TAKEN) {
    report_crash(signal, info, context);
    restore_previous_actions();
    atomic_store(&installed, 0);
    __atomic_store_n(&handled_pid, pid, __ATOMIC_SEQ_CST);
  } else if (claim == IL_CLAIM_OTHER_THREAD) {
    /* Another thread is writing its report: let it finish (bounded: 1000 brief pauses, or as long as
       its helper may take and 2 s more), then fall through to the previous handler, which it has
       restored. */
    uint64_t pauses = 1000, helper_pauses = il_crash_helper_timeout_ms() / 10 + 200;
    if (il_crash_helper_ready() && helper_pauses > pauses) pauses = helper_pauses;
    for (uint64_t i = 0; i < pauses && __atomic_load_n(&handled_pid, __ATOMIC_SEQ_CST) != pid; i++)
      pause_briefly();
    restore_previous_actions();
  } else {
    restore_previous_actions();  /* the handler itself crashed: get out of the way */
  }
  /* A fault the kernel raised (si_code > 0, not SI_KERNEL) recurs when the instruction is retried
     on return; anything else (abort, raise, kill, int3) is sent again. */
  int code = info != NULL ? info->si_code : 0;
  int is_fault = signal == SIGSEGV || signal == SIGBUS || signal == SIGILL || signal == SIGFPE;
  if (!(is_fault && code > 0 && code != 0x80)) reraise(signal, info);
  errno = saved_errno;
}

/* ---- install ---- */

static size_t alternate_stack_size(void) {
  long minimum = sysconf(_SC_SIGSTKSZ);  /* honours AT_MINSIGSTKSZ (AVX-512 frames) */
  size_t size = 64 * 1024;
  if (minimum > 0 && (size_t)minimum * 4 > size) size = (size_t)minimum * 4;
  return size;
}

int il_crash_prepare_thread(void) {
  size_t size = alternate_stack_size();
  stack_t current;
  if (sigaltstack(NULL, &current) != 0) return errno;
  if (!(current.ss_flags & SS_DISABLE) && current.ss_size >= size) return 0;  /* keep a big enough one */
  long page = sysconf(_SC_PAGESIZE);
  size_t guard = page > 0 ? (size_t)page : 4096;
  /* One guard page below the stack: overflowing the handler faults instead of scribbling. */
  char *memory = mmap(NULL, size + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return errno;
  mprotect(memory, guard, PROT_NONE);
  stack_t stack = {.ss_sp = memory + guard, .ss_size = size, .ss_flags = 0};
  if (sigaltstack(&stack, NULL) != 0) {
    int error = errno;
    munmap(memory, size + guard);
    return error;
  }
  return 0;  /* kept for the thread's life: a handler may still be running on it */
}

/* The alternate stacks given to threads created after install (il_crash_prepare_new_thread) are
   freed by this key's destructor when the thread exits, unless a handler is running on the stack
   then (sigaltstack refuses to disable a stack in use: it is left mapped). */
static pthread_key_t owned_stack_key;
static pthread_once_t owned_stack_once = PTHREAD_ONCE_INIT;

static void free_owned_stack(void *memory) {
  stack_t disable = {.ss_flags = SS_DISABLE};
  stack_t current;
  if (sigaltstack(NULL, &current) != 0 || (current.ss_flags & SS_ONSTACK)) return;
  if (sigaltstack(&disable, NULL) != 0) return;
  long page = sysconf(_SC_PAGESIZE);
  munmap(memory, alternate_stack_size() + (page > 0 ? (size_t)page : 4096));
}

static void make_owned_stack_key(void) {
  if (pthread_key_create(&owned_stack_key, free_owned_stack) != 0) owned_stack_key = (pthread_key_t)-1;
}

int il_crash_installed(void) { return atomic_load(&installed); }

int il_crash_prepare_new_thread(void) {
  stack_t current;
  if (sigaltstack(NULL, &current) != 0) return errno;
  if (!(current.ss_flags & SS_DISABLE)) return 0;  /* someone gave it one already */
  pthread_once(&owned_stack_once, make_owned_stack_key);
  if (owned_stack_key == (pthread_key_t)-1) return EAGAIN;
  int error = il_crash_prepare_thread();
  if (error != 0) return error;
  stack_t now;
  if (sigaltstack(NULL, &now) != 0) return errno;
  long page = sysconf(_SC_PAGESIZE);
  char *mapping = (char *)now.ss_sp - (page > 0 ? page : 4096);  /* the guard page starts the mapping */
  return pthread_setspecific(owned_stack_key, mapping);
}

int il_crash_open_report(const char *path) {
  int fd;
  /* A report holds the process's registers and addresses: its owner's alone (0600). Never through a
     symbolic link at the path (one planted in a folder others can write would send the reports on). */
  do fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  while (fd < 0 && errno == EINTR);
  return fd;
}

int il_crash_install(int fd) {
  if (fd < 0 && !(fd == -1 && il_crash_helper_ready())) return EBADF;
  pthread_mutex_lock(&install_mutex);
  atomic_store(&report_fd, fd);
  if (atomic_load(&installed)) {
    pthread_mutex_unlock(&install_mutex);
    return 0;
  }
  int error = il_crash_prepare_memory();
  if (error == 0) error = il_crash_prepare_capture();
  if (error == 0) error = il_crash_prepare_thread();
  if (error != 0) {
    pthread_mutex_unlock(&install_mutex);
    return error;
  }
  il_crash_capture_process_identity();
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crash_handler;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < IL_CRASH_SIGNAL_COUNT; i++) sigaddset(&action.sa_mask, il_crash_signals[i]);
  sigaddset(&action.sa_mask, SIGPIPE);
  __atomic_store_n(&reporting, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&handled_pid, 0, __ATOMIC_SEQ_CST);
  for (int i = 0; i < IL_CRASH_SIGNAL_COUNT; i++) {
    if (sigaction(il_crash_signals[i], &action, &previous_actions[i]) != 0) {
      error = errno;
      for (int j = 0; j < i; j++) sigaction(il_crash_signals[j], &previous_actions[j], NULL);
      pthread_mutex_unlock(&install_mutex);
      return error;
    }
  }
  atomic_store(&installed, 1);
  /* The images in the table now are the startup set; those added later go in the report's timeline. */
  il_crash_table_start_timeline();
  pthread_mutex_unlock(&install_mutex);
  return 0;
}

int il_crash_uninstall(void) {
  pthread_mutex_lock(&install_mutex);
  int was = atomic_exchange(&installed, 0);
  if (was) restore_previous_actions();
  pthread_mutex_unlock(&install_mutex);
  return was ? 0 : ESRCH;
}
