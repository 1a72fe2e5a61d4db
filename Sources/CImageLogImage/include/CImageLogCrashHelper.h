#ifndef CIMAGELOG_CRASH_HELPER_H
#define CIMAGELOG_CRASH_HELPER_H
/* Out-of-process crash capture, the part that runs in the crashed process: header-only and libc-free,
   so that the crash handler the library installs (Sources/CImageLog/crash_handler.c) and the one the
   audit module of `imagelog run --crash-dir` installs (Sources/CImageLogAudit, which links no libc)
   start the helper with the same code.

   At install (il_helper_prepare, not async-signal-safe but allocating nothing): the helper's path,
   resolved then, and its argv and envp, laid out in the plan, so that the crash needs no lookup, no
   allocation and no formatting beyond a PID.

   At the crash (il_helper_run, async-signal-safe: raw system calls only, no lock, bounded time), on
   the crashed thread, inside its signal handler:
   1. The record (il_helper_record) gets the signal, si_code, fault address, the crashed thread's id,
      the time, and the registers of the ucontext the kernel passed the handler: the helper reads it
      with process_vm_readv at the address its command line gives (--record), and unwinds the crashed
      thread from those registers, not from where the handler is.
   2. SIGCHLD is set to SIG_DFL until the helper is reaped: a program that ignores SIGCHLD would have
      the helper reaped by the kernel, and one that handles it might reap it itself (its waitpid(-1)),
      and either would take the helper's exit status.
   3. A raw clone (no glibc fork: its atfork handlers take malloc's lock, which a crashed thread or
      another may hold) makes the child; it waits on a pipe until the parent has named it the process's
      ptracer (PR_SET_PTRACER, for Yama's ptrace_scope 1: the helper is a child, not an ancestor), so
      it cannot try to attach before it may; then it unblocks every signal and execs the helper. An exec
      that fails writes its errno to a close-on-exec pipe and exits 127.
      Every descriptor made here is close-on-exec, and none is waited on for its end of file: a child
      the program forks while a thread is in here holds copies of the pipes (fork copies descriptors
      whatever their flags), and may live for ever; the wait below ends in bounded time all the same.
   4. The parent waits, at most `timeout_ns`, until the helper says on the "done" pipe (its --done-fd)
      that its first report is written (every thread read, unwound, written down: the process is of no
      more use to it), or exits (poll on a pidfd, CLONE_PIDFD, Linux 5.2 and later; else waitpid every
      millisecond). A helper still running at the timeout is killed (the kernel lets go of the threads
      it had seized). The helper symbolicates after the go-ahead, while the program dies, and replaces
      its report with the symbolicated one (atomically): the program does not wait for DWARF.
   A helper that neither says so nor exits 0 wrote no report; the caller then writes the in-process
   report.

   The record's layout, read by the helper field by field (CrashRecord.swift), little-endian on both
   architectures:
      0  magic "ILCRASH\0"          48  u32 arch (1 x86_64, 2 aarch64)
      8  u32 version (2)            52  u32 register count (33)
     12  u32 size (368)             56  u64 known registers (bit n: DWARF register n)
     16  i32 pid                    64  u64 flags (x86_64 rflags, aarch64 pstate)
     20  i32 tid                    72  u64 address of the siginfo in the crashed process
     24  i32 signal                 80  u64 address of the ucontext in the crashed process
     28  i32 si_code                88  u64 registers[33], DWARF numbered (CImageLogUnwind.h)
     32  u64 fault address (si_addr, 0 for a signal without one)
     40  i64 time of the crash, seconds since the epoch (UTC)
    then, from version 2 (size 368):
    352  u64 address of the unloaded-image history in the crashed process (crash_unloaded.h), 0 if none
    360  i64 time of the crash, nanoseconds since the epoch (the history's clock) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* Headers for types and constants only: nothing here calls the C library. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/ucontext.h>
#include <sys/wait.h>
#include <time.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/* ---- raw system calls: no libc, no errno ---- */

/* A system call; returns the result, or -errno. */
static inline long il_sys6(long number, long a, long b, long c, long d, long e, long f) {
#if defined(__x86_64__)
  register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
  long result;
  __asm__ volatile("syscall" : "=a"(result) : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return result;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = number, x0 __asm__("x0") = a, x1 __asm__("x1") = b, x2 __asm__("x2") = c,
                x3 __asm__("x3") = d, x4 __asm__("x4") = e, x5 __asm__("x5") = f;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
  return x0;
#else
#error "the crash helper makes its own system calls: add this architecture's convention"
#endif
}
#define IL_SYS(number, ...) IL_SYS_N(number, __VA_ARGS__, 0, 0, 0, 0, 0, 0)
#define IL_SYS_N(number, a, b, c, d, e, f, ...) \
  il_sys6((number), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

/* The kernel's struct sigaction (rt_sigaction's), which is not glibc's: handler, flags, restorer, then
   a 64-bit mask, on x86_64 and aarch64 alike. */
typedef struct {
  void *handler;
  unsigned long flags;
  void *restorer;
  uint64_t mask;
} il_kernel_sigaction;

/* ---- civil time, for report dates and file names (localtime and gmtime may lock and read files) ---- */

typedef struct {
  int64_t year;
  int month, day, hour, minute, second;
} il_civil_time;

/* `seconds` since the epoch as a UTC date (days-from-civil inverted, as in Howard Hinnant's date
   algorithms). */
static inline il_civil_time il_civil_from_seconds(int64_t seconds) {
  int64_t days = seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400);
  int64_t rest = seconds - days * 86400;
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t year = yoe + era * 400;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  il_civil_time time;
  time.day = (int)(doy - (153 * mp + 2) / 5 + 1);
  time.month = (int)(mp < 10 ? mp + 3 : mp - 9);
  time.year = time.month <= 2 ? year + 1 : year;
  time.hour = (int)(rest / 3600);
  time.minute = (int)(rest / 60 % 60);
  time.second = (int)(rest % 60);
  return time;
}

/* ---- the record the helper reads ---- */

enum { IL_HELPER_RECORD_VERSION = 2, IL_HELPER_REGISTERS = 33 };

typedef struct {
  char magic[8];
  uint32_t version, size;
  int32_t pid, tid, signal, code;
  uint64_t address;
  int64_t time;
  uint32_t arch, register_count;
  uint64_t known, flags, siginfo_address, context_address;
  uint64_t registers[IL_HELPER_REGISTERS];
  uint64_t history;
  int64_t time_ns;
} il_helper_record;

_Static_assert(offsetof(il_helper_record, time) == 40, "the record's layout is the helper's (CrashRecord.swift)");
_Static_assert(offsetof(il_helper_record, registers) == 88, "the record's layout is the helper's (CrashRecord.swift)");
_Static_assert(offsetof(il_helper_record, history) == 352, "the record's layout is the helper's (CrashRecord.swift)");
_Static_assert(sizeof(il_helper_record) == 368, "the record's layout is the helper's (CrashRecord.swift)");

/* Fills `record` for a crash of thread `tid` of `pid` by `signal`, with the handler's siginfo and
   ucontext (either may be NULL) and the process's unloaded-image history (NULL without one).
   Async-signal-safe. */
static inline void il_helper_fill_record(il_helper_record *record, int32_t pid, int32_t tid, int signal,
                                         const siginfo_t *info, const void *context, const void *history) {
  static const char magic[8] = {'I', 'L', 'C', 'R', 'A', 'S', 'H', 0};
  for (int i = 0; i < 8; i++) record->magic[i] = magic[i];
  record->version = IL_HELPER_RECORD_VERSION;
  record->size = (uint32_t)sizeof *record;
  record->pid = pid;
  record->tid = tid;
  record->signal = signal;
  record->code = info != NULL ? info->si_code : 0;
  /* si_addr means something only for a fault the kernel raised (si_code > 0, not SI_KERNEL). */
  record->address = info != NULL && info->si_code > 0 && info->si_code != 0x80 ? (uint64_t)(uintptr_t)info->si_addr : 0;
  struct timespec now = {0, 0};
  IL_SYS(SYS_clock_gettime, CLOCK_REALTIME, &now);
  record->time = (int64_t)now.tv_sec;
  record->time_ns = (int64_t)now.tv_sec * 1000000000 + (int64_t)now.tv_nsec;
  record->history = (uint64_t)(uintptr_t)history;
  record->siginfo_address = (uint64_t)(uintptr_t)info;
  record->context_address = (uint64_t)(uintptr_t)context;
  record->register_count = IL_HELPER_REGISTERS;
  record->known = 0;
  record->flags = 0;
  for (int i = 0; i < IL_HELPER_REGISTERS; i++) record->registers[i] = 0;
  const ucontext_t *uc = context;
#if defined(__x86_64__)
  record->arch = 1;
  if (uc == NULL) return;
  /* DWARF order: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip. */
  static const int order[17] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
                                REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  for (int i = 0; i < 17; i++) record->registers[i] = (uint64_t)uc->uc_mcontext.gregs[order[i]];
  record->known = ((uint64_t)1 << 17) - 1;
  record->flags = (uint64_t)uc->uc_mcontext.gregs[REG_EFL];
#elif defined(__aarch64__)
  record->arch = 2;
  if (uc == NULL) return;
  for (int i = 0; i < 31; i++) record->registers[i] = (uint64_t)uc->uc_mcontext.regs[i];
  record->registers[31] = (uint64_t)uc->uc_mcontext.sp;
  record->registers[32] = (uint64_t)uc->uc_mcontext.pc;
  record->known = ((uint64_t)1 << 33) - 1;
  record->flags = (uint64_t)uc->uc_mcontext.pstate;
#endif
}

/* ---- the plan: what the crash starts, laid out at install ---- */

enum {
  IL_HELPER_PATH_MAX = 4096,
  IL_HELPER_EXTRA_ARGUMENTS = 8,
  /* The default wait for the helper. Long enough for a helper on a loaded machine that reads DWARF of
     large images (or asks a debuginfod server) to finish; the same default as Swift's backtracer's
     `timeout`. A supervisor that must restart the program sooner sets its own. */
  IL_HELPER_DEFAULT_TIMEOUT_MS = 30000,
};

typedef struct {
  char path[IL_HELPER_PATH_MAX];        /* the helper executable, absolute */
  char directory[IL_HELPER_PATH_MAX];   /* where the helper (and the fallback) writes, absolute */
  char pid_text[16];                    /* written at the crash */
  char record_text[24];                 /* "0x..." of the record */
  char done_text[16];                   /* the helper's --done-fd, written by the child before exec */
  char *argv[10 + IL_HELPER_EXTRA_ARGUMENTS];
  char *const *envp;
  uint64_t timeout_ns;
  int ready;
} il_helper_plan;

static inline size_t il_helper_length(const char *text) {
  size_t length = 0;
  while (text[length] != '\0') length++;
  return length;
}

static inline int il_helper_copy(char *to, size_t capacity, const char *from) {
  size_t length = il_helper_length(from);
  if (length >= capacity) return 0;
  for (size_t i = 0; i <= length; i++) to[i] = from[i];
  return 1;
}

/* `value` in decimal (or "0x" and lowercase hex when `hex`) into `text`, NUL-terminated. */
static inline void il_helper_number(char *text, uint64_t value, int hex) {
  char digits[24];
  int n = 0;
  unsigned base = hex ? 16 : 10;
  do digits[n++] = "0123456789abcdef"[value % base];
  while ((value /= base) != 0 && n < (int)sizeof digits);
  int used = 0;
  if (hex) { text[used++] = '0'; text[used++] = 'x'; }
  while (n > 0) text[used++] = digits[--n];
  text[used] = '\0';
}

/* Lays out the helper's command line: PATH capture-crash --pid (at the crash) --record ADDRESS
   --crash-dir DIRECTORY --done-fd (in the child), then `extra` (NULL-terminated, at most
   IL_HELPER_EXTRA_ARGUMENTS; the strings must outlive the plan). `path` and `directory` must be
   absolute (the program may change its directory before it crashes); `envp` is kept as given and must
   stay valid. Returns 1, or 0 when a path is relative or too long. */
static inline int il_helper_prepare(il_helper_plan *plan, const char *path, const char *directory,
                                    const il_helper_record *record, uint64_t timeout_ms, char *const *envp,
                                    char *const *extra) {
  plan->ready = 0;
  if (path == NULL || directory == NULL || path[0] != '/' || directory[0] != '/') return 0;
  if (!il_helper_copy(plan->path, sizeof plan->path, path) ||
      !il_helper_copy(plan->directory, sizeof plan->directory, directory))
    return 0;
  il_helper_number(plan->record_text, (uint64_t)(uintptr_t)record, 1);
  plan->pid_text[0] = '\0';
  static char capture[] = "capture-crash", pid_option[] = "--pid", record_option[] = "--record",
              directory_option[] = "--crash-dir", done_option[] = "--done-fd";
  char **argv = plan->argv;
  int n = 0;
  argv[n++] = plan->path;
  argv[n++] = capture;
  argv[n++] = pid_option;
  argv[n++] = plan->pid_text;
  argv[n++] = record_option;
  argv[n++] = plan->record_text;
  argv[n++] = directory_option;
  argv[n++] = plan->directory;
  argv[n++] = done_option;
  argv[n++] = plan->done_text;
  for (int i = 0; extra != NULL && extra[i] != NULL && i < IL_HELPER_EXTRA_ARGUMENTS; i++) argv[n++] = extra[i];
  argv[n] = NULL;
  plan->envp = envp;
  plan->timeout_ns = timeout_ms * 1000000u;
  plan->ready = 1;
  return 1;
}

/* Whether the program's environment variable `entry` ("NAME=value") goes to the helper too. The
   helper is imagelog: not audited or preloaded by what the program runs with, without the audit
   module's variables, and with Swift's backtracer off (il_helper_swift_backtrace: imagelog's own
   runtime has no swift-backtrace beside it, and a helper that crashes is replaced by the in-process
   report anyway). */
static inline int il_helper_passes_variable(const char *entry) {
  static const char *const dropped[] = {"LD_AUDIT=", "LD_PRELOAD=", "IMAGELOG_AUDIT_", "SWIFT_BACKTRACE="};
  for (size_t i = 0; i < sizeof dropped / sizeof *dropped; i++) {
    size_t k = 0;
    while (dropped[i][k] != '\0' && entry[k] == dropped[i][k]) k++;
    if (dropped[i][k] == '\0') return 0;
  }
  return 1;
}

static const char il_helper_swift_backtrace[] = "SWIFT_BACKTRACE=enable=no";

/* ---- the crash ---- */

/* Which thread handles a crash: the first to claim `state`, a word both handlers keep, holding the
   claimer's PID (high half) and thread ID (low half), 0 before any crash. A word another process
   wrote is not ours, and is claimed over: a vfork child that crashed before its exec wrote it into
   memory it shared with its parent, and a child forked while a thread was handling a crash inherits
   a copy; either would otherwise leave this process waiting for a report nobody writes. */
enum {
  IL_CLAIM_TAKEN = 0,        /* the caller handles the crash */
  IL_CLAIM_OTHER_THREAD = 1, /* another thread of this process does: wait for it */
  IL_CLAIM_AGAIN = 2,        /* the caller itself already does: the handler crashed */
};

static inline int il_helper_claim(uint64_t *state, int32_t pid, int32_t tid) {
  uint64_t mine = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid, expected = 0;
  /* Only this process's threads change the word while we look (and a vfork child's, while its
     parent thread is suspended): a few rounds settle it. */
  for (int round = 0; round < 64; round++) {
    if (__atomic_compare_exchange_n(state, &expected, mine, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return IL_CLAIM_TAKEN;
    if ((int32_t)(expected >> 32) == pid) return expected == mine ? IL_CLAIM_AGAIN : IL_CLAIM_OTHER_THREAD;
  }
  return IL_CLAIM_OTHER_THREAD;
}

/* What became of the helper. */
enum {
  IL_HELPER_CAPTURED = 0,     /* it said its report is written, or exited 0 */
  IL_HELPER_NOT_STARTED = 1,  /* no plan, or clone or a pipe failed (detail: errno) */
  IL_HELPER_EXEC_FAILED = 2,  /* execve failed (detail: errno: ENOENT missing, EACCES refused) */
  IL_HELPER_FAILED = 3,       /* it exited with status `detail` */
  IL_HELPER_CRASHED = 4,      /* it died of signal `detail` */
  IL_HELPER_TIMED_OUT = 5,    /* still running after the timeout: killed */
};

typedef struct {
  int outcome;
  int detail;
  uint64_t waited_ns;
} il_helper_result;

static inline uint64_t il_helper_now_ns(void) {
  struct timespec now = {0, 0};
  IL_SYS(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static inline void il_helper_pause_ns(uint64_t ns) {
  struct timespec pause = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  IL_SYS(SYS_nanosleep, &pause, NULL);
}

/* The child's side: wait for the go-ahead, then become the helper, `done` its --done-fd. Never
   returns. The plan is the child's own copy: writing the descriptor's number into it changes nothing
   in the parent. */
static inline void il_helper_become(il_helper_plan *plan, int go, int status, int done) {
  char byte = 0;
  long got;
  do got = IL_SYS(SYS_read, go, &byte, 1);
  while (got == -EINTR);
  if (got == 1) {
    uint64_t none = 0;
    IL_SYS(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
    /* Descriptors the program left open stay the program's: the helper gets 0, 1 and 2 (close_range's
       CLOEXEC form, Linux 5.11; before it they are inherited, which costs nothing but tidiness). */
    IL_SYS(SYS_close_range, 3, ~0u, 4 /* CLOSE_RANGE_CLOEXEC */);
    IL_SYS(SYS_fcntl, done, F_SETFD, 0);
    il_helper_number(plan->done_text, (uint64_t)done, 0);
    long error = IL_SYS(SYS_execve, plan->path, plan->argv, plan->envp);
    int code = (int)-error;
    IL_SYS(SYS_write, status, &code, sizeof code);
  }
  for (;;) IL_SYS(SYS_exit_group, 127);
}

/* ---- what the in-process report needs, kept from install ---- */

/* A descriptor opened at install for the crash's in-process report: at the crash the program may have
   no descriptor left to give (RLIMIT_NOFILE lowered, every number taken), and the report must still be
   written. Kept close-on-exec (a program executed installs its own), at a high number the program will
   not get from open(2) by accident, checked at the crash to be the file that was opened (a program may
   have put another on the number), and used only by the process that opened it: a forked child shares
   its open file, so it opens its own. */
typedef struct {
  int fd;
  int32_t pid;
  uint64_t device, inode;
} il_kept_file;

/* The kernel's struct stat's device and inode, the first two words on x86_64 and aarch64 alike. */
static inline int il_helper_identity(int fd, uint64_t identity[2]) {
  uint64_t info[32];  /* struct stat: 144 bytes on x86_64, 128 on aarch64 */
  if (IL_SYS(SYS_fstat, fd, info) != 0) return 0;
  identity[0] = info[0];
  identity[1] = info[1];
  return 1;
}

/* Keeps `fd` (closed here, -errno or -1 for none) as `kept`: moved to a high number (below 1024 where
   the limit allows, as imagelog run places its own), close-on-exec. Not async-signal-safe only in that
   it is meant for install. */
static inline void il_helper_keep(il_kept_file *kept, long fd) {
  if (kept->fd >= 0) IL_SYS(SYS_close, kept->fd);
  kept->fd = -1;
  if (fd < 0) return;
  struct { uint64_t current, maximum; } limit = {256, 256};
  IL_SYS(SYS_prlimit64, 0, 7 /* RLIMIT_NOFILE */, 0, &limit);
  long ceiling = limit.current < 1024 ? (long)limit.current : 1024, floors[3] = {ceiling - 1, ceiling / 2, 10};
  long copy = -1;
  for (int i = 0; i < 3 && copy < 0; i++)
    if (floors[i] > 2) copy = IL_SYS(SYS_fcntl, fd, F_DUPFD_CLOEXEC, floors[i]);
  uint64_t identity[2];
  if (copy >= 0 && il_helper_identity((int)copy, identity)) {
    kept->fd = (int)copy;
    kept->pid = (int32_t)IL_SYS(SYS_getpid, 0);
    kept->device = identity[0];
    kept->inode = identity[1];
  } else if (copy >= 0) {
    IL_SYS(SYS_close, copy);
  }
  IL_SYS(SYS_close, fd);
}

/* The kept descriptor, or -1 when this is not the process that kept it or the number holds another
   file. Async-signal-safe. */
static inline int il_helper_kept(const il_kept_file *kept) {
  uint64_t identity[2];
  if (kept->fd < 0 || (int32_t)IL_SYS(SYS_getpid, 0) != kept->pid || !il_helper_identity(kept->fd, identity)) return -1;
  return identity[0] == kept->device && identity[1] == kept->inode ? kept->fd : -1;
}

/* A new file in `directory` with no name yet (O_TMPFILE, mode 0640): a descriptor, or -errno. */
static inline long il_helper_open_unnamed(const char *directory) {
  return IL_SYS(SYS_openat, AT_FDCWD, directory, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0640);
}

/* Gives the unnamed file `fd` the name `path` (never in place of an existing one): 0 or -errno.
   Through /proc, as linkat's AT_EMPTY_PATH needs a capability. Async-signal-safe. */
static inline long il_helper_link_unnamed(int fd, const char *path) {
  char self[40] = "/proc/self/fd/";
  il_helper_number(self + 14, (uint64_t)fd, 0);
  return IL_SYS(SYS_linkat, AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW);
}

/* "imagelog: cannot write the report in DIRECTORY (errno N)" on standard error: the in-process
   report's file could not be made or named. Async-signal-safe. */
static inline void il_helper_say_unwritten(const char *directory, long error) {
  char number[24];
  il_helper_number(number, (uint64_t)(error < 0 ? 0 : error), 0);
  const char *parts[5] = {"imagelog: cannot write the report in ", directory, " (errno ", number, ")\n"};
  for (int i = 0; i < 5; i++) IL_SYS(SYS_write, 2, parts[i], il_helper_length(parts[i]));
}

#ifdef IL_HELPER_TEST_HOOKS
/* Tests only (CrashHandlerTests builds crash-program.c and the handler with IL_HELPER_TEST_HOOKS):
   called in the crashed process right after the helper is cloned, every pipe still open, so that a
   test can fork there without looping on a race. */
void il_helper_test_after_clone(long child);
#endif

/* Starts the helper for the crash `record` describes (filled already) and waits for it, at most the
   plan's timeout. Async-signal-safe; called on the crashed thread, in its handler. */
static inline void il_helper_run(il_helper_plan *plan, il_helper_result *result) {
  result->outcome = IL_HELPER_NOT_STARTED;
  result->detail = 0;
  result->waited_ns = 0;
  if (!plan->ready) return;
  uint64_t started = il_helper_now_ns();
  int32_t pid = (int32_t)IL_SYS(SYS_getpid, 0);
  il_helper_number(plan->pid_text, (uint64_t)pid, 0);

  int go[2], status[2], done[2];
  long failed = IL_SYS(SYS_pipe2, go, O_CLOEXEC);
  if (failed < 0) { result->detail = (int)-failed; return; }
  /* Non-blocking: the exec error is written before the child exits, and a child the program forks
     while we wait holds a copy of the writing end, which must not keep us reading. */
  failed = IL_SYS(SYS_pipe2, status, O_CLOEXEC | O_NONBLOCK);
  if (failed == 0) {
    failed = IL_SYS(SYS_pipe2, done, O_CLOEXEC);
    if (failed < 0) {
      IL_SYS(SYS_close, status[0]);
      IL_SYS(SYS_close, status[1]);
    }
  }
  if (failed < 0) {
    IL_SYS(SYS_close, go[0]);
    IL_SYS(SYS_close, go[1]);
    result->detail = (int)-failed;
    return;
  }
  il_kernel_sigaction default_action = {0, 0, 0, 0}, previous_child;
  long child_action = IL_SYS(SYS_rt_sigaction, SIGCHLD, &default_action, &previous_child, 8);

  /* clone's third argument is where CLONE_PIDFD puts the descriptor, on x86_64 and aarch64 alike. */
  int pidfd = -1;
  long child = IL_SYS(SYS_clone, CLONE_PIDFD | SIGCHLD, 0, &pidfd, 0, 0);
  if (child == -EINVAL) {
    pidfd = -1;
    child = IL_SYS(SYS_clone, SIGCHLD, 0, 0, 0, 0);
  }
  if (child == 0) {
    IL_SYS(SYS_close, go[1]);
    IL_SYS(SYS_close, status[0]);
    IL_SYS(SYS_close, done[0]);
    il_helper_become(plan, go[0], status[1], done[1]);
  }
#ifdef IL_HELPER_TEST_HOOKS
  il_helper_test_after_clone(child);
#endif
  IL_SYS(SYS_close, go[0]);
  IL_SYS(SYS_close, status[1]);
  IL_SYS(SYS_close, done[1]);
  if (child < 0) {
    result->detail = (int)-child;
    IL_SYS(SYS_close, go[1]);
    IL_SYS(SYS_close, status[0]);
    IL_SYS(SYS_close, done[0]);
    if (child_action == 0) IL_SYS(SYS_rt_sigaction, SIGCHLD, &previous_child, NULL, 8);
    return;
  }
  /* EINVAL without Yama: any process of the same user may trace us already. */
  IL_SYS(SYS_prctl, PR_SET_PTRACER, child, 0, 0, 0);
  char byte = 'g';
  IL_SYS(SYS_write, go[1], &byte, 1);
  IL_SYS(SYS_close, go[1]);

  uint64_t deadline = started + plan->timeout_ns;
  int wait_status = 0, reaped = 0, killed = 0, said_done = 0, done_open = 1;
  for (;;) {
    long got = IL_SYS(SYS_wait4, child, &wait_status, WNOHANG | __WALL, NULL);
    if (got == child) { reaped = 1; break; }
    if (got < 0 && got != -EINTR) break;  /* ECHILD: not ours to wait for any more */
    uint64_t now = il_helper_now_ns();
    if (now >= deadline) {
      if (killed) break;
      IL_SYS(SYS_kill, child, SIGKILL);
      killed = 1;
      done_open = 0;
      deadline = now + 1000000000u;  /* a killed helper in an uninterruptible sleep is not waited for long */
      continue;
    }
    uint64_t left = deadline - now;
    if (pidfd < 0 && left > 1000000u) left = 1000000u;  /* no pidfd: look at waitpid every millisecond */
    struct { int fd; short events, revents; } entries[2] = {{done_open ? done[0] : -1, 1 /* POLLIN */, 0},
                                                          {pidfd, 1 /* POLLIN */, 0}};
    struct timespec timeout = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
    IL_SYS(SYS_ppoll, entries, 2, &timeout, NULL, 8);
    if (done_open && entries[0].revents != 0) {
      char byte = 0;
      long read_done = IL_SYS(SYS_read, done[0], &byte, 1);
      if (read_done == 1) { said_done = 1; break; }  /* the report is written: the helper goes on alone */
      if (read_done != -EINTR) done_open = 0;  /* closed without a word: its exit tells */
    }
  }
  IL_SYS(SYS_close, done[0]);
  if (pidfd >= 0) IL_SYS(SYS_close, pidfd);
  int exec_error = 0;
  long status_read = IL_SYS(SYS_read, status[0], &exec_error, sizeof exec_error);
  IL_SYS(SYS_close, status[0]);
  IL_SYS(SYS_prctl, PR_SET_PTRACER, 0, 0, 0, 0);
  if (child_action == 0) IL_SYS(SYS_rt_sigaction, SIGCHLD, &previous_child, NULL, 8);
  result->waited_ns = il_helper_now_ns() - started;

  if (said_done) {
    result->outcome = IL_HELPER_CAPTURED;
  } else if (killed) {
    result->outcome = IL_HELPER_TIMED_OUT;
  } else if (status_read == (long)sizeof exec_error) {
    result->outcome = IL_HELPER_EXEC_FAILED;
    result->detail = exec_error;
  } else if (!reaped) {
    result->outcome = IL_HELPER_FAILED;
    result->detail = -1;
  } else if (WIFEXITED(wait_status)) {
    result->outcome = WEXITSTATUS(wait_status) == 0 ? IL_HELPER_CAPTURED : IL_HELPER_FAILED;
    result->detail = WEXITSTATUS(wait_status);
  } else {
    result->outcome = IL_HELPER_CRASHED;
    result->detail = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
  }
}

/* "imagelog: the crash helper PATH <what>; writing the report in process\n" into `text` (at least
   IL_HELPER_PATH_MAX + 160 bytes); returns its length. */
static inline size_t il_helper_describe_failure(const il_helper_plan *plan, const il_helper_result *result,
                                                char *text, size_t capacity) {
  size_t used = 0;
#define IL_PUT(string) do { const char *s_ = (string); \
    while (*s_ != '\0' && used + 1 < capacity) text[used++] = *s_++; } while (0)
  char number[24];
  IL_PUT("imagelog: the crash helper ");
  IL_PUT(plan->ready ? plan->path : "(none)");
  switch (result->outcome) {
  case IL_HELPER_NOT_STARTED: IL_PUT(" could not be started (errno "); break;
  case IL_HELPER_EXEC_FAILED:
    IL_PUT(result->detail == ENOENT ? " is missing (errno " : " could not be executed (errno ");
    break;
  case IL_HELPER_FAILED: IL_PUT(" failed (exit status "); break;
  case IL_HELPER_CRASHED: IL_PUT(" died of signal "); break;
  default: IL_PUT(" did not finish within the timeout, and was killed (after ");
  }
  if (result->outcome == IL_HELPER_TIMED_OUT) {
    il_helper_number(number, result->waited_ns / 1000000u, 0);
    IL_PUT(number);
    IL_PUT(" ms");
  } else {
    il_helper_number(number, (uint64_t)(result->detail < 0 ? 0 : result->detail), 0);
    IL_PUT(number);
  }
  IL_PUT(result->outcome == IL_HELPER_CRASHED ? "" : ")");
  IL_PUT("; writing the report in process\n");
#undef IL_PUT
  return used;
}

/* The name both the helper and the in-process fallback give a crash's files in the crash directory:
   "PROGRAM.PID.YYYYMMDDTHHMMSSZ" (then ".crash" or ".dmp"), PROGRAM the program's name with every byte
   that is not a letter, digit, '-', '_', '+' or an inner '.' made '_' (at most 64; "unknown" when
   empty): CrashFolder.stem's names, which the helper writes by. Written to `text` (at least 128 bytes)
   NUL-terminated; returns its length. */
static inline size_t il_helper_file_stem(char *text, const char *name, int32_t pid, int64_t time) {
  size_t used = 0;
  for (size_t i = 0; name != NULL && name[i] != '\0' && i < 64; i++) {
    char c = name[i];
    int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                c == '+' || c == '-' || (c == '.' && used > 0);
    text[used++] = plain ? c : '_';
  }
  if (used == 0) {
    for (const char *unknown = "unknown"; *unknown != '\0'; unknown++) text[used++] = *unknown;
  }
  text[used++] = '.';
  char number[24];
  il_helper_number(number, (uint64_t)(uint32_t)pid, 0);
  for (size_t i = 0; number[i] != '\0'; i++) text[used++] = number[i];
  text[used++] = '.';
  il_civil_time civil = il_civil_from_seconds(time);
  const int64_t parts[6] = {civil.year, civil.month, civil.day, civil.hour, civil.minute, civil.second};
  for (int part = 0; part < 6; part++) {
    int width = part == 0 ? 4 : 2;
    uint64_t value = parts[part] < 0 ? 0 : (uint64_t)parts[part];
    char digits[24];
    int n = 0;
    do digits[n++] = (char)('0' + value % 10);
    while ((value /= 10) != 0 && n < 20);
    while (n < width) digits[n++] = '0';
    while (n > 0) text[used++] = digits[--n];
    if (part == 2) text[used++] = 'T';
  }
  text[used++] = 'Z';
  text[used] = '\0';
  return used;
}
#endif
