#ifndef CIMAGELOG_H
#define CIMAGELOG_H
/* The only C the Swift side sees. Every function is prefixed il_. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "CImageLogCrash.h" /* crash-time image table and handler (crash_*.c) */
#include "CImageLogImage.h" /* one image's layout, build-id and line (header-only) */

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

/* One loaded object as dl_iterate_phdr(3) reports it (see il_walk_objects). Pointers live for the
   callback only. */
typedef struct {
  uintptr_t load_bias;   /* dlpi_addr */
  const char *name;      /* dlpi_name: "" for the main executable (and often the vDSO) */
  const void *phdrs;     /* dlpi_phdr: ElfW(Phdr)[phnum], in memory */
  uint16_t phnum;        /* dlpi_phnum */
  uint64_t adds, subs;   /* dlpi_adds / dlpi_subs: cheap change detection */
  size_t name_length;    /* strlen(name) */
} il_object;

/* What identifies a loaded object while it stays loaded: its load bias and where its program
   headers are (inside its own mapping, or a loader allocation). */
typedef struct {
  uintptr_t load_bias;
  const void *phdrs;
} il_object_key;

/* One walk that compares the loader's list with the objects a caller already knows. */
typedef struct {
  /* In: the known objects, in load order (NULL when none). */
  const il_object_key *keys;
  size_t key_count;
  /* In: when non-zero, an object equal to keys[cursor] only advances the cursor; visit is not called. */
  int match_keys;
  /* In: when non-zero, the walk stops at the first object if its counters equal known_adds/known_subs. */
  int stop_if_unchanged;
  uint64_t known_adds, known_subs;
  /* In and out: the next known object expected; visit may move it. */
  size_t cursor;
  /* Out: the current object's position in the loader's list (inside visit), then the object count. */
  size_t index;
  /* Out: the counters of the first object; whether the walk stopped because they were unchanged. */
  uint64_t adds, subs;
  int unchanged;
} il_walk;

/* dl_iterate_phdr(3) over the list, calling visit for the objects that are not the expected known one
   (all of them without match_keys). Stops when visit returns non-zero. The loader's list lock is
   held meanwhile: visit may read the object's mapped program headers and notes. */
int il_walk_objects(il_walk *walk, int (*visit)(const il_object *object, il_walk *walk, void *context),
                    void *context);

/* il_layout, il_note_area and the image line are in CImageLogImage.h (shared with the audit module). */

/* Fills `layout`; returns 0 (layout unset) when the object has no PT_LOAD, or a PT_LOAD's
   p_vaddr + p_memsz overflows 64 bits. A PT_LOAD whose p_vaddr + p_filesz overflows adds nothing
   to file_end; a rounding that would overflow is left unrounded. */
int il_object_layout(const il_object *object, uint64_t page_size, il_layout *layout);

/* The next mapped PT_NOTE at or after program header `*index`, in header order; advances `*index`
   past it. Returns 0 when there is none left. Skips a PT_NOTE that is empty, whose end overflows,
   larger than INTPTR_MAX (an Int), or that no PT_LOAD's file bytes (p_vaddr..p_vaddr + p_filesz,
   not wrapping) contain. */
int il_object_next_note(const il_object *object, uint16_t *index, il_note_area *note);

/* The loader's change counters without a full walk (from the first object's dlpi_adds/dlpi_subs). */
void il_loader_counters(uint64_t *adds, uint64_t *subs);

/* getauxval(AT_SYSINFO_EHDR): where the vDSO's ELF header is mapped, 0 when there is none. */
uint64_t il_vdso_address(void);

/* getauxval(AT_PAGESZ), or 4096 when the kernel did not say. */
uint64_t il_page_size(void);

/* What dladdr(3) knows about an address. Strings live as long as their object stays loaded. */
typedef struct {
  const char *file_name;    /* dli_fname */
  uint64_t file_base;       /* dli_fbase */
  const char *symbol_name;  /* dli_sname, NULL when unknown */
  uint64_t symbol_address;  /* dli_saddr, 0 when unknown */
} il_symbol_info;

/* Mirrors dladdr(3): non-zero when `address` lies in a loaded object. */
int il_lookup_address(uint64_t address, il_symbol_info *info);

/* --- dlopen/dlclose interposition (interpose.c) ---------------------------------------------
   The shim defines dlopen, dlmopen and dlclose. Linked into an executable, the executable's
   definitions come first in symbol lookup, so calls from the executable and (when the symbol is
   exported) from every shared library reach them. Each forwards to the next definition
   (dlsym(RTLD_NEXT)) and then, outside the loader's lock, calls the hook. */

/* Called after a successful outermost dlopen/dlmopen/dlclose on the calling thread. `NULL` turns
   notification off. The hook runs on the thread that called dlopen/dlclose. */
void il_set_loader_hook(void (*hook)(void));

/* How many dlopen/dlclose calls are under way on this thread (inside a constructor or destructor
   run by dlopen/dlclose this is non-zero: the loader's lock is held there). */
int il_loader_call_depth(void);

/* Whether any observer is registered: dlclose then notes the load bias of the object it closes. */
void il_set_observing(int observing);

/* Inside the hook run after an outermost dlclose: the load bias (l_addr) of the object that dlclose
   was called for, read before it ran. 0 when unknown (not after a dlclose, or no observers then). */
int il_closed_load_bias(uintptr_t *bias);

/* Inside the hook run after an outermost dlopen: fills `object` with the object that dlopen returned
   (its link map's load bias and name, its program headers from dlinfo RTLD_DI_PHDR) when that object
   is the last one in dl_iterate_phdr's order right after the loaded object containing
   `last_load_address` (its link map's l_prev, and no l_next); 0 otherwise or without glibc 2.36. */
int il_opened_object(uint64_t last_load_address, il_object *object);

/* Whether a loaded object contains `address`: 1 or 0, from _dl_find_object (no lock); -1 when built
   against a glibc before 2.36 (the observers' shortcuts need it and dlinfo RTLD_DI_PHDR). */
int il_address_is_loaded(uint64_t address);

/* The real dlopen/dlclose, bypassing the interposers (for benchmarks and tests). */
void *il_real_dlopen(const char *file, int mode);
int il_real_dlclose(void *handle);

/* --- delivery gate (gate.c): lets a thread wait until events up to a sequence number were delivered. */

/* Records that every event up to `sequence` has been delivered and wakes the waiters. */
void il_gate_publish(uint64_t sequence);
/* Blocks until il_gate_publish has been called with a value >= `sequence`. */
void il_gate_wait(uint64_t sequence);
/* Whether this thread is delivering events now (its handlers may call dlopen: never wait then). */
void il_set_delivering(int delivering);
int il_is_delivering(void);

#endif
