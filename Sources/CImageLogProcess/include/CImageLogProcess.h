#ifndef CIMAGELOG_PROCESS_H
#define CIMAGELOG_PROCESS_H
/* The C the inspection of other processes and files uses (ProcessInspection): no interposer, no crash
   handler, nothing that runs inside the process to watch it. Every function is prefixed il_. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "CImageLogHTTP.h" /* libcurl's variadic calls for the crash uploader (http.c) */

/* other processes */
/* Copies up to `length` bytes at `address` in process `pid` into `buffer`; returns the count
   copied or -1 with errno set. Mirrors process_vm_readv(2) with one local and one remote range. */
ssize_t il_read_process_memory(pid_t pid, uint64_t address, void *buffer, size_t length);
/* When the main thread of `pid` has exited (pthread_exit: its task is a zombie, and /proc/PID/maps,
   /proc/PID/exe and process_vm_readv(PID) no longer reach the memory the other threads run in), the
   first of its other threads in /proc/PID/task that has not exited; 0 otherwise (a live main thread, no
   such thread, or the process gone). */
pid_t il_live_thread(pid_t pid);
/* For `imagelog watch`: SIGINT and SIGTERM set a flag and interrupt blocking calls (EINTR). */
void il_catch_interrupts(void);
/* True once il_catch_interrupts's handler has run. */
int il_was_interrupted(void);
/* Sets the extended attribute `name` of the open file `descriptor` (a crash file's
   system.posix_acl_access); 0, or -1 with errno. Mirrors fsetxattr(2) with flags 0. */
int il_set_file_attribute(int descriptor, const char *name, const void *value, size_t size);
/* Reads the extended attribute `name` of `path` itself, not following a symbolic link (a crash file's
   user.imagelog.crash marker) into `value`; its length, or -1 with errno. Mirrors lgetxattr(2). */
long il_get_file_attribute(const char *path, const char *name, void *value, size_t size);
/* end of other processes */

/* Worker threads (threads.c): pthread_create(3) with `body(context)`, but the thread starts on a
   processor other than the caller's when the process may run on more than one (then anywhere it may). */
int il_start_thread(pthread_t *thread, void *(*body)(void *), void *context);
/* The processors the calling thread may run on (its affinity mask; `taskset`, cpusets), at least 1. */
int il_processor_count(void);

/* The fields of a /proc stat line (/proc/PID/stat, /proc/PID/task/TID/stat) imagelog uses. */
typedef struct {
  char state;              /* the state letter (R, S, D, Z, X, t ...); 0 when the file could not be read */
  char name[64];           /* the command (comm) as the file writes it, NUL-terminated (cut at 63 bytes) */
  int32_t parent;          /* ppid */
  uint64_t flags;          /* the kernel's PF_* flags (PF_KTHREAD: a kernel thread) */
} il_task_stat;

/* Reads the stat file at `path` (relative to the open directory `directory`, or AT_FDCWD) into `out`:
   1, or 0 with `out` zeroed when it cannot be read or parsed (the task is gone). */
int il_read_task_stat(int directory, const char *path, il_task_stat *out);

/* --- other processes' threads (ptrace.c): `imagelog pid --threads` ---------------------------
   Stops every thread of a process with PTRACE_SEIZE + PTRACE_INTERRUPT (never a SIGSTOP: a seized
   tracee is resumed by the kernel if imagelog dies, even by SIGKILL, so nothing is left stopped),
   copies each thread's registers and the live part of its stack, and lets every thread go at once.
   The unwinding happens afterwards, on the copy: the target is stopped only for the copying. */

/* One thread's registers in DWARF numbering (as CImageLogUnwind.h numbers them): value[n] is DWARF
   register n; bit n of `known` says it holds a value. arch: 1 x86_64, 2 aarch64, 3 i386 (il_arch;
   a 32-bit tracee of a 64-bit x86 kernel). */
typedef struct {
  int arch;
  uint64_t known;
  uint64_t value[33];
} il_thread_registers;

/* What became of one thread. */
enum {
  IL_THREAD_CAPTURED = 0,    /* stopped; registers and stack copied; let go */
  IL_THREAD_VANISHED = 1,    /* it exited between being listed and being read (ESRCH, or its exit reported) */
  IL_THREAD_NO_ANSWER = 2,   /* it did not stop within the time given (uninterruptible sleep, say) */
  IL_THREAD_REFUSED = 3,     /* PTRACE_SEIZE failed: `error` (EPERM: traced already, a zombie, access) */
  IL_THREAD_FAILED = 4,      /* stopped, but its registers could not be read: `error` */
  IL_THREAD_UNSUPPORTED = 5, /* stopped, but its register set is not x86_64/aarch64/i386 (32-bit arm) */
};

typedef struct {
  pid_t tid;
  int status;              /* IL_THREAD_* */
  int error;               /* errno of the call that failed, or 0 */
  int stop_signal;         /* a signal the thread stopped for, given back to it at detach; 0 when none */
  il_thread_registers registers;  /* with IL_THREAD_CAPTURED */
  /* The thread's whole general register set as the kernel gives it (NT_PRSTATUS's user_regs_struct, in
     its order): x86_64's 27 words, aarch64's 34, or a 32-bit x86 tracee's 17 32-bit words widened;
     machine_count says how many. What a minidump's context holds beyond the unwinder's registers. */
  uint64_t machine[34];
  int machine_count;
  uint64_t stack_address;  /* target address of stack[0]: the stack pointer (less the red zone) */
  uint8_t *stack;          /* malloc'd copy of stack_size bytes; NULL when nothing could be read */
  size_t stack_size;
  /* From /proc/PID/task/TID/stat when the thread was listed, before any thread was stopped (during
     the stop every thread shows 't'); state 0 when it could not be read. */
  il_task_stat stat;
} il_thread_capture;

typedef struct {
  il_thread_capture *threads;  /* in /proc/PID/task order (the main thread first), late ones after */
  size_t count;
  uint64_t stopped_ns;         /* CLOCK_MONOTONIC from the first PTRACE_INTERRUPT to the last PTRACE_DETACH */
  size_t stragglers;           /* threads that had not stopped, still traced when this returned (see below) */
} il_threads_capture;

/* Lists the threads of `pid` (/proc/PID/task, the main thread first) into `out`, each with its name,
   state and flags: what il_capture_threads then stops, and what tells a caller first whether there
   is anything to stop (a kernel thread, a zombie). Returns 0, or -1 with errno (ENOENT: no such
   process, ENOMEM); then `out` holds nothing to free. */
int il_list_threads(pid_t pid, il_threads_capture *out);

/* Stops every thread of `pid` listed in `capture` by il_list_threads (re-listing /proc/PID/task until
   no new thread appears, each new one read as il_list_threads reads it), copies each one's registers
   and stack, and detaches them all. `mappings` holds `mapping_count` start/end
   pairs of the process's mappings in address order: a thread's stack is copied from its stack
   pointer to the end of the mapping holding it, at most `max_stack_bytes` (`max_stack_bytes` / 16
   when no mapping holds it). Threads get `answer_ns` after the last one stopped (and 10 times that
   in all) to stop; one that has not (uninterruptible sleep) stays seized and is released as soon as it stops, waited for up to `release_ns` more once
   the others run again; the kernel releases any left when this process exits. SIGINT, SIGTERM,
   SIGHUP and SIGQUIT are blocked on the calling thread while threads are stopped, so they arrive
   once every thread is let go. Returns 0, or -1 with errno (ENOMEM) when memory runs out; then
   `capture` holds nothing to free. */
int il_capture_threads(pid_t pid, const uint64_t *mappings, size_t mapping_count, uint64_t max_stack_bytes,
                       uint64_t answer_ns, uint64_t release_ns, il_threads_capture *capture);

/* Frees the copies and the thread array of a capture. */
void il_free_threads_capture(il_threads_capture *capture);
/* end of other processes' threads */

/* This process's auxiliary vector (process.c). */
/* getauxval(AT_SYSINFO_EHDR): where the vDSO's ELF header is mapped, 0 when there is none. */
uint64_t il_vdso_address(void);

/* getauxval(AT_PAGESZ), or 4096 when the kernel did not say. */
uint64_t il_page_size(void);

#endif
