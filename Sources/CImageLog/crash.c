/* Crash-time image table and crash handler.

   Everything reachable from the signal handler uses only async-signal-safe system calls (write,
   read, open, close, getdents64, getpid, gettid, clock_gettime, sigaction, sigpending,
   rt_sigtimedwait, rt_tgsigqueueinfo, futex, process_vm_readv, nanosleep): no malloc, no stdio,
   no locks, no localtime; numbers are formatted by hand.

   The image table. Writers (the image observers) keep an authoritative list under a mutex and
   after every change rebuild a flat snapshot (entries + one text arena) into the slot that is not
   published, then publish it with one atomic store. A reader (the crash handler, or
   il_crash_write_binary_images) loads the published index, counts itself in that slot's reader
   count, and checks the index is still published (else it uncounts and tries again, a bounded
   number of times). A writer rebuilds a slot only when its reader count is 0; it waits a little
   for late readers of the old slot and otherwise leaves the change pending for the next update.
   With sequentially consistent atomics a slot is never written while a reader that passed the
   check reads it: a reader whose recheck saw the slot published was counted before the writer
   could have found the slot unpublished and checked its count. The reader never waits for the
   writer, so a crash that interrupts the writer on its own thread reads the last complete
   snapshot at once. The slots' arrays are allocated (and grown) only by the writer, outside
   signal context; capacity is not fixed.

   Every thread. The reporting thread (the one that crashed) lists /proc/self/task with
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
     like any other; the handlers only read memory through the reader below.
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
     backtracer (installed before us) runs after us and suspends the threads with its own signals.

   Memory. Every read at crash time goes through read_memory, which never faults: a range inside a
   readable segment of an image in the published table is copied directly (the table is what we
   trust; each image's segments are first checked still mapped, once per walk, as dlclose unmaps
   before its notification reaches the table); anything else (stacks) takes one process_vm_readv
   on ourselves, or, where a seccomp profile forbids that, the probe pipe: the bytes are written
   to a pipe created at install time and read back, and write(2) returns EFAULT for memory that is
   not readable.

   Unwinding. Each thread is unwound by the one shared unwinder (CImageLogUnwind: the call frame
   information of .eh_frame_hdr/.eh_frame as the loader mapped them, then frame pointers where an
   image has none for the pc, then stack scanning as the last resort), through read_memory, with
   each image's PT_GNU_EH_FRAME found when the image was added to the table. Frames found by frame
   pointer or by scanning carry that mark in the report. The walk stops at 128 frames. */
#define _GNU_SOURCE
#include "CImageLogCrash.h"
#include "CImageLogImage.h"
#include "CImageLogUnwind.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* ------------------------------------------------------------------ image table */

/* An image's readable PT_LOAD segments (run-time [start, end)), where the crash-time memory reader
   copies directly, and its PT_GNU_EH_FRAME, where the unwinder finds its call frame information:
   both found when the image is added (image_layout), from the program headers the loader used. */
enum { IL_SEGMENTS = 6 };
typedef struct {
  uint64_t load_bias;
  uint64_t eh_frame_hdr;
  uint32_t segment_count;
  uint64_t segments[IL_SEGMENTS][2];
} il_table_layout;

typedef struct {
  uint64_t load_address, text_start, text_end;
  uint32_t name_offset, name_length, line_offset, line_length;
  il_table_layout layout;
} il_table_entry;

typedef struct {
  size_t count, capacity;
  size_t text_used, text_capacity;
  il_table_entry *entries;
  char *text;
} il_table_slot;

typedef struct {
  uint64_t load_address, text_start, text_end;
  char *name, *line;
  il_table_layout layout;
} il_master_entry;

static pthread_mutex_t table_mutex = PTHREAD_MUTEX_INITIALIZER;
static il_master_entry *master;            /* guarded by table_mutex */
static size_t master_count, master_capacity;
static int master_pending;                 /* a change not yet published (a reader was active) */
static il_table_slot slots[2];
static _Atomic int published_slot = -1;    /* -1: nothing published yet */
static _Atomic int slot_readers[2];

/* Rebuilds the unpublished slot from `master` and publishes it. Called with table_mutex held. */
static int publish_locked(void) {
  int current = atomic_load(&published_slot);
  int target = current == 0 ? 1 : 0;
  /* Readers of the unpublished slot started before the last publish and finish soon; never wait
     long: a crash handler that reads it may never return. */
  for (int i = 0; atomic_load(&slot_readers[target]) != 0; i++) {
    if (i == 1000) {
      master_pending = 1;
      return 0;
    }
    sched_yield();
  }
  il_table_slot *slot = &slots[target];
  size_t text_needed = 0;
  for (size_t i = 0; i < master_count; i++)
    text_needed += strlen(master[i].name) + strlen(master[i].line);
  if (slot->capacity < master_count) {
    size_t capacity = master_count < 64 ? 64 : master_count * 2;
    il_table_entry *entries = malloc(capacity * sizeof *entries);
    if (entries == NULL) {
      master_pending = 1;  /* the published table stays whole; the next update retries */
      return -1;
    }
    free(slot->entries);
    slot->entries = entries;
    slot->capacity = capacity;
  }
  if (slot->text_capacity < text_needed || slot->text == NULL) {
    size_t capacity = text_needed < 16384 ? 16384 : text_needed * 2;
    char *text = malloc(capacity);
    if (text == NULL) {
      master_pending = 1;
      return -1;
    }
    free(slot->text);
    slot->text = text;
    slot->text_capacity = capacity;
  }
  size_t used = 0;
  for (size_t i = 0; i < master_count; i++) {
    il_table_entry *entry = &slot->entries[i];
    size_t name_length = strlen(master[i].name), line_length = strlen(master[i].line);
    entry->load_address = master[i].load_address;
    entry->text_start = master[i].text_start;
    entry->text_end = master[i].text_end;
    entry->layout = master[i].layout;
    entry->name_offset = (uint32_t)used;
    entry->name_length = (uint32_t)name_length;
    memcpy(slot->text + used, master[i].name, name_length);
    used += name_length;
    entry->line_offset = (uint32_t)used;
    entry->line_length = (uint32_t)line_length;
    memcpy(slot->text + used, master[i].line, line_length);
    used += line_length;
  }
  slot->count = master_count;
  slot->text_used = used;
  atomic_store(&published_slot, (int)(slot - slots));
  master_pending = 0;
  return 0;
}

typedef struct {
  uint64_t load_address;
  il_table_layout *layout;
} il_layout_search;

/* dl_iterate_phdr callback: the object one of whose PT_LOADs starts (page-aligned) at or holds the
   load address. */
static int find_layout(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size;
  il_layout_search *search = context;
  int found = 0;
  for (int i = 0; i < info->dlpi_phnum && !found; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uint64_t start = (uint64_t)info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
    uint64_t page_start = start & ~(uint64_t)4095;
    found = search->load_address >= page_start && search->load_address < end;
  }
  if (!found) return 0;
  il_table_layout *layout = search->layout;
  layout->load_bias = (uint64_t)info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uint64_t start = (uint64_t)info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_GNU_EH_FRAME) layout->eh_frame_hdr = start;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && ph->p_memsz > 0 && layout->segment_count < IL_SEGMENTS) {
      layout->segments[layout->segment_count][0] = start;
      layout->segments[layout->segment_count][1] = start + ph->p_memsz;
      layout->segment_count++;
    }
  }
  return 1;
}

/* The loaded object's segments and PT_GNU_EH_FRAME; all zero for an address no object holds (the
   tests' fake images). */
static il_table_layout image_layout(uint64_t load_address) {
  il_table_layout layout;
  memset(&layout, 0, sizeof layout);
  il_layout_search search = {load_address, &layout};
  dl_iterate_phdr(find_layout, &search);
  return layout;
}

int il_crash_table_add(uint64_t load_address, uint64_t text_start, uint64_t text_end,
                       const char *name, const char *line) {
  if (name == NULL || line == NULL || text_end < text_start ||
      strlen(name) > 4096 || strlen(line) > 8192 || strchr(line, '\n') != NULL) {
    errno = EINVAL;
    return -1;
  }
  char *name_copy = strdup(name), *line_copy = strdup(line);
  if (name_copy == NULL || line_copy == NULL) {
    free(name_copy);
    free(line_copy);
    errno = ENOMEM;
    return -1;
  }
  il_table_layout layout = image_layout(load_address);  /* before the lock: dl_iterate_phdr takes the loader's */
  pthread_mutex_lock(&table_mutex);
  size_t index = master_count;
  for (size_t i = 0; i < master_count; i++)
    if (master[i].load_address == load_address) index = i;
  if (index == master_count) {
    if (master_count == master_capacity) {
      size_t capacity = master_capacity == 0 ? 64 : master_capacity * 2;
      il_master_entry *grown = realloc(master, capacity * sizeof *grown);
      if (grown == NULL) {
        pthread_mutex_unlock(&table_mutex);
        free(name_copy);
        free(line_copy);
        errno = ENOMEM;
        return -1;
      }
      master = grown;
      master_capacity = capacity;
    }
    master_count++;
  } else {
    free(master[index].name);
    free(master[index].line);
  }
  master[index] = (il_master_entry){load_address, text_start, text_end, name_copy, line_copy, layout};
  int result = publish_locked();
  pthread_mutex_unlock(&table_mutex);
  if (result != 0) errno = ENOMEM;
  return result;
}

int il_crash_table_remove(uint64_t load_address) {
  int removed = 0;
  pthread_mutex_lock(&table_mutex);
  for (size_t i = 0; i < master_count; i++) {
    if (master[i].load_address != load_address) continue;
    free(master[i].name);
    free(master[i].line);
    memmove(&master[i], &master[i + 1], (master_count - i - 1) * sizeof *master);
    master_count--;
    removed = 1;
    break;
  }
  if (removed || master_pending) publish_locked();
  pthread_mutex_unlock(&table_mutex);
  return removed;
}

/* Reader side: async-signal-safe, never waits. Returns the slot to read (NULL when nothing was
   ever published) and the index to pass to table_release. */
static const il_table_slot *table_acquire(int *held) {
  for (int attempt = 0;; attempt++) {
    int index = atomic_load(&published_slot);
    if (index < 0) {
      *held = -1;
      return NULL;
    }
    atomic_fetch_add(&slot_readers[index], 1);
    /* Still published: the writer cannot have started rebuilding it. */
    if (atomic_load(&published_slot) == index) {
      *held = index;
      return &slots[index];
    }
    atomic_fetch_sub(&slot_readers[index], 1);
    /* 64 lost races with a writer publishing again and again (never seen): no table rather
       than a spin or a slot being rebuilt. */
    if (attempt == 64) {
      *held = -1;
      return NULL;
    }
  }
}

static void table_release(int held) {
  if (held >= 0) atomic_fetch_sub(&slot_readers[held], 1);
}

static const il_table_entry *table_lookup(const il_table_slot *slot, uint64_t address) {
  if (slot == NULL) return NULL;
  for (size_t i = 0; i < slot->count; i++)
    if (address >= slot->entries[i].text_start && address < slot->entries[i].text_end)
      return &slot->entries[i];
  return NULL;
}

size_t il_crash_table_count(void) {
  int held;
  const il_table_slot *slot = table_acquire(&held);
  size_t count = slot == NULL ? 0 : slot->count;
  table_release(held);
  return count;
}

/* ------------------------------------------------------------------ output */

typedef struct {
  int fd;
  int failed;       /* errno of the first failed write, or 0 */
  size_t used;
  ssize_t total;
  char buffer[2048];
} il_writer;

static void w_flush(il_writer *w) {
  size_t done = 0;
  while (done < w->used && !w->failed) {
    ssize_t n = write(w->fd, w->buffer + done, w->used - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      w->failed = n < 0 ? errno : EIO;
      break;
    }
    done += (size_t)n;
    w->total += n;
  }
  w->used = 0;
}

static void w_bytes(il_writer *w, const char *bytes, size_t length) {
  while (length > 0) {
    if (w->used == sizeof w->buffer) w_flush(w);
    size_t room = sizeof w->buffer - w->used;
    size_t chunk = length < room ? length : room;
    memcpy(w->buffer + w->used, bytes, chunk);
    w->used += chunk;
    bytes += chunk;
    length -= chunk;
  }
}

static void w_str(il_writer *w, const char *string) { w_bytes(w, string, strlen(string)); }

static void w_spaces(il_writer *w, size_t count) {
  while (count-- > 0) w_bytes(w, " ", 1);
}

/* Decimal, zero-padded to at least `width` digits. */
static void w_udec(il_writer *w, uint64_t value, int width) {
  char digits[24];
  int n = 0;
  do {
    digits[sizeof digits - 1 - n++] = (char)('0' + value % 10);
    value /= 10;
  } while (value != 0);
  while (n < width && n < (int)sizeof digits) digits[sizeof digits - 1 - n++] = '0';
  w_bytes(w, digits + sizeof digits - n, (size_t)n);
}

static void w_sdec(il_writer *w, int64_t value) {
  if (value < 0) {
    w_bytes(w, "-", 1);
    w_udec(w, (uint64_t)0 - (uint64_t)value, 0);
  } else {
    w_udec(w, (uint64_t)value, 0);
  }
}

/* "0x" then lowercase hex, zero-padded to at least `width` digits. */
static void w_hex(il_writer *w, uint64_t value, int width) {
  char digits[16];
  int n = 0;
  do {
    digits[sizeof digits - 1 - n++] = "0123456789abcdef"[value & 15];
    value >>= 4;
  } while (value != 0);
  while (n < width && n < (int)sizeof digits) digits[sizeof digits - 1 - n++] = '0';
  w_bytes(w, "0x", 2);
  w_bytes(w, digits + sizeof digits - n, (size_t)n);
}

static void write_table(il_writer *w, const il_table_slot *slot) {
  if (slot == NULL) return;
  for (size_t i = 0; i < slot->count; i++) {
    w_bytes(w, slot->text + slot->entries[i].line_offset, slot->entries[i].line_length);
    w_bytes(w, "\n", 1);
  }
}

ssize_t il_crash_write_binary_images(int fd) {
  int saved_errno = errno;
  il_writer w = {.fd = fd};
  int held;
  const il_table_slot *slot = table_acquire(&held);
  write_table(&w, slot);
  table_release(held);
  w_flush(&w);
  if (w.failed) {
    errno = w.failed;
    return -1;
  }
  errno = saved_errno;
  return w.total;
}

/* ------------------------------------------------------------------ install-time state */

#define IL_CRASH_SIGNAL_COUNT 6
static const int crash_signals[IL_CRASH_SIGNAL_COUNT] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
static struct sigaction previous_actions[IL_CRASH_SIGNAL_COUNT];
static _Atomic int installed;
static _Atomic int report_fd = -1;
static int probe_pipe[2] = {-1, -1};
static atomic_flag probe_lock = ATOMIC_FLAG_INIT;
static int self_read_works;                /* process_vm_readv on ourselves worked at install */
static char process_path[PATH_MAX];
static const char *process_name = "???";
static char os_version[256];
static _Atomic pid_t reporting_thread;     /* the tid writing a report, or 0 */
static pthread_mutex_t install_mutex = PTHREAD_MUTEX_INITIALIZER;

enum { IL_MAX_FRAMES = 128 };

/* ------------------------------------------------------------------ safe memory reads */

/* Copies `length` bytes at `address` into `out` through the probe pipe; 0 if any is unreadable.
   One pipe serves every thread, so a read holds probe_lock from its write to its read (a bounded
   spin: the holder is another thread inside our handlers, which never wait while holding it). */
static int probe_read(uint64_t address, void *out, size_t length) {
  if (probe_pipe[0] < 0) return 0;
  int spins = 0;
  while (atomic_flag_test_and_set(&probe_lock))
    if (++spins > 1000000) return 0;
  int ok = 1;
  char *to = out;
  while (ok && length > 0) {
    size_t chunk = length < 4096 ? length : 4096;  /* <= PIPE_BUF: one atomic write */
    ssize_t n;
    do n = write(probe_pipe[1], (const void *)(uintptr_t)address, chunk);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
      ok = 0;
      break;
    }
    ssize_t got = 0;
    while (got < n) {  /* drain exactly what went in, even a partial write */
      ssize_t r = read(probe_pipe[0], to + got, (size_t)(n - got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += r;
    }
    if (got != n || (size_t)n != chunk) ok = 0;
    to += chunk;
    address += chunk;
    length -= chunk;
  }
  atomic_flag_clear(&probe_lock);
  return ok;
}

/* One system call that cannot fault: process_vm_readv on ourselves (EFAULT for what is not mapped),
   or the probe pipe where a seccomp profile forbids it. */
static int syscall_read(uint64_t address, void *out, size_t length) {
  if (self_read_works) {
    struct iovec local = {out, length}, remote = {(void *)(uintptr_t)address, length};
    ssize_t n = syscall(SYS_process_vm_readv, (pid_t)syscall(SYS_getpid), &local, 1UL, &remote, 1UL, 0UL);
    return n == (ssize_t)length;
  }
  return probe_read(address, out, length);
}

/* The crash-time memory reader (il_memory's shape). Reads inside a readable segment of an image in
   the published table are copied directly, once that image's segments were found still mapped
   during this walk (an image unmapped by a dlclose whose notification has not yet reached the
   table must not fault us); anything else (stacks, heap) takes one system call. */
typedef struct {
  const il_table_slot *table;
  uint64_t checked, mapped;                /* bit i: table entry i checked / found mapped */
} il_reader;

static int read_memory(void *context, uint64_t address, void *out, size_t length) {
  il_reader *reader = context;
  if (length == 0) return 1;
  if (address + length < address) return 0;
  const il_table_slot *table = reader->table;
  for (size_t i = 0; table != NULL && i < table->count; i++) {
    const il_table_layout *layout = &table->entries[i].layout;
    for (uint32_t k = 0; k < layout->segment_count; k++) {
      if (address < layout->segments[k][0] || address + length > layout->segments[k][1]) continue;
      uint64_t bit = i < 64 ? (uint64_t)1 << i : 0;
      if (bit == 0 || !(reader->checked & bit)) {
        int mapped = 1;
        for (uint32_t j = 0; j < layout->segment_count && mapped; j++) {
          unsigned char first, last;
          mapped = syscall_read(layout->segments[j][0], &first, 1) &&
                   syscall_read(layout->segments[j][1] - 1, &last, 1);
        }
        reader->checked |= bit;
        if (mapped) reader->mapped |= bit;
        if (!mapped) return syscall_read(address, out, length);
      } else if (!(reader->mapped & bit)) {
        return syscall_read(address, out, length);
      }
      memcpy(out, (const void *)(uintptr_t)address, length);
      return 1;
    }
  }
  return syscall_read(address, out, length);
}

/* ------------------------------------------------------------------ report */

static const char *signal_name(int signal) {
  switch (signal) {
  case SIGSEGV: return "SIGSEGV";
  case SIGBUS: return "SIGBUS";
  case SIGILL: return "SIGILL";
  case SIGFPE: return "SIGFPE";
  case SIGABRT: return "SIGABRT";
  case SIGTRAP: return "SIGTRAP";
  default: return NULL;
  }
}

/* The <signal.h> name of si_code for `signal`, or NULL. */
static const char *code_name(int signal, int code) {
  static const char *const segv[] = {"SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR", "SEGV_ACCADI",
                                     "SEGV_ADIDERR", "SEGV_ADIPERR", "SEGV_MTEAERR", "SEGV_MTESERR", "SEGV_CPERR"};
  static const char *const bus[] = {"BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"};
  static const char *const ill[] = {"ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC",
                                    "ILL_PRVREG", "ILL_COPROC", "ILL_BADSTK", "ILL_BADIADDR"};
  static const char *const fpe[] = {"FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND",
                                    "FPE_FLTRES", "FPE_FLTINV", "FPE_FLTSUB", "FPE_FLTUNK", "FPE_CONDTRAP"};
  static const char *const trap[] = {"TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT", "TRAP_UNK",
                                     "TRAP_PERF"};
  switch (code) {
  case 0: return "SI_USER";
  case 0x80: return "SI_KERNEL";
  case -1: return "SI_QUEUE";
  case -2: return "SI_TIMER";
  case -3: return "SI_MESGQ";
  case -4: return "SI_ASYNCIO";
  case -5: return "SI_SIGIO";
  case -6: return "SI_TKILL";
  default: break;
  }
#define IL_PICK(table) (code >= 1 && (size_t)code <= sizeof table / sizeof *table ? table[code - 1] : NULL)
  switch (signal) {
  case SIGSEGV: return IL_PICK(segv);
  case SIGBUS: return IL_PICK(bus);
  case SIGILL: return IL_PICK(ill);
  case SIGFPE: return IL_PICK(fpe);
  case SIGTRAP: return IL_PICK(trap);
  default: return NULL;
  }
#undef IL_PICK
}

/* Writes "YYYY-MM-DD HH:MM:SS +0000" for `seconds` since the epoch (UTC; days-from-civil inverted
   as in Howard Hinnant's date algorithms). */
static void w_date(il_writer *w, int64_t seconds) {
  int64_t days = seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400);
  int64_t rest = seconds - days * 86400;
  int64_t z = days + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t year = yoe + era * 400;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t day = doy - (153 * mp + 2) / 5 + 1;
  int64_t month = mp < 10 ? mp + 3 : mp - 9;
  if (month <= 2) year++;
  w_udec(w, (uint64_t)year, 4);
  w_bytes(w, "-", 1);
  w_udec(w, (uint64_t)month, 2);
  w_bytes(w, "-", 1);
  w_udec(w, (uint64_t)day, 2);
  w_bytes(w, " ", 1);
  w_udec(w, (uint64_t)(rest / 3600), 2);
  w_bytes(w, ":", 1);
  w_udec(w, (uint64_t)(rest / 60 % 60), 2);
  w_bytes(w, ":", 1);
  w_udec(w, (uint64_t)(rest % 60), 2);
  w_str(w, " +0000");
}

/* ------------------------------------------------------------------ frames */

/* How a frame was found: CImageLogUnwind.h's il_frame_trust. */
enum { TRUST_FRAME_POINTER = IL_FRAME_FRAME_POINTER, TRUST_SCAN = IL_FRAME_SCAN };

/* One thread's place in a report: filled by the thread itself (the crashed one, or another one
   answering the capture signal), read by the reporting thread once `state` says done. */
typedef struct {
  _Atomic int state;
  pid_t tid;
  int outcome;                  /* written by the reporting thread only */
  int frame_count;
  uint64_t pc[IL_MAX_FRAMES];
  uint8_t trust[IL_MAX_FRAMES];
} il_thread_slot;

static void record(il_thread_slot *out, uint64_t pc, int trust) {
  if (out->frame_count >= IL_MAX_FRAMES) return;
  out->pc[out->frame_count] = pc;
  out->trust[out->frame_count] = (uint8_t)trust;
  out->frame_count++;
}

/* The unwinder's view of an image: the table entry that holds `pc`, with the PT_GNU_EH_FRAME found
   when it was added. */
static int find_unwind_image(void *context, uint64_t pc, il_unwind_image *image) {
  const il_reader *reader = context;
  const il_table_entry *entry = table_lookup(reader->table, pc);
  if (entry == NULL) return 0;
  memset(image, 0, sizeof *image);
  image->text_start = entry->text_start;
  image->text_end = entry->text_end;
  image->load_bias = entry->layout.load_bias;
  image->eh_frame_hdr = entry->layout.eh_frame_hdr;
  return 1;
}

/* The general registers of a ucontext in DWARF numbering; 0 for an architecture we do not unwind. */
static int registers_from(const void *context, il_register_set *set) {
  memset(set, 0, sizeof *set);
  if (context == NULL) return 0;
  const ucontext_t *uc = context;
#if defined(__x86_64__)
  static const int order[17] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
                                REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  set->arch = IL_ARCH_X86_64;
  for (int i = 0; i < 17; i++) set->value[i] = (uint64_t)uc->uc_mcontext.gregs[order[i]];
  set->known = ((uint64_t)1 << 17) - 1;
  return 1;
#elif defined(__aarch64__)
  set->arch = IL_ARCH_AARCH64;
  for (int i = 0; i < 31; i++) set->value[i] = (uint64_t)uc->uc_mcontext.regs[i];
  set->value[IL_AARCH64_SP] = (uint64_t)uc->uc_mcontext.sp;
  set->value[IL_AARCH64_PC] = (uint64_t)uc->uc_mcontext.pc;
  set->known = ((uint64_t)1 << 33) - 1;
  return 1;
#else
  (void)uc;
  return 0;
#endif
}

/* The frames of the thread whose registers `context` holds, into `out`: the shared unwinder
   (CImageLogUnwind: call frame information, then frame pointers, then scanning), every read
   through read_memory. */
static void unwind_context(il_reader *reader, const void *context, il_thread_slot *out) {
  out->frame_count = 0;
  il_register_set registers;
  if (!registers_from(context, &registers)) return;
  int pc = registers.arch == IL_ARCH_AARCH64 ? IL_AARCH64_PC : IL_X86_64_RIP;
  il_unwinder unwinder = {{read_memory, reader}, find_unwind_image, reader, 8192};
  il_unwind_cursor cursor;
  il_unwind_start(&cursor, &registers);
  record(out, cursor.registers.value[pc], cursor.trust);
  while (out->frame_count < IL_MAX_FRAMES && il_unwind_step(&unwinder, &cursor))
    record(out, cursor.registers.value[pc], cursor.trust);
}

/* ------------------------------------------------------------------ the other threads */

enum {
  IL_THREAD_SLOTS = 1024,       /* threads unwound in one report; the rest are listed by tid */
  IL_OVERFLOW_TIDS = 4096,
  IL_ANSWER_BUDGET_MS = 100,    /* how long the reporting thread waits for all answers */
  IL_ANSWER_LIMIT_MS = 1000,    /* ... and for a thread still runnable then (a loaded machine) */
  IL_RELEASE_BUDGET_MS = 5000,  /* how long an answered thread waits for the report to be written */
};
enum { SLOT_REQUESTED = 1, SLOT_WRITING, SLOT_DONE, SLOT_CLOSED };
enum { OUTCOME_UNWOUND, OUTCOME_SILENT, OUTCOME_BLOCKED, OUTCOME_GONE, OUTCOME_CRASHED };

static il_thread_slot *thread_slots;           /* IL_THREAD_SLOTS of them, mapped at install */
static pid_t overflow_tids[IL_OVERFLOW_TIDS];
static int capture_signal;                     /* chosen at install */
static struct sigaction capture_previous;
static _Atomic int capturing;                  /* a report is asking the other threads */
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
  il_reader reader = {table_acquire(&held), 0, 0};
  unwind_context(&reader, context, slot);
  table_release(held);
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

/* "/proc/self/task/TID/LEAF" into `path` (at least 64 bytes). */
static void task_path(char *path, pid_t tid, const char *leaf) {
  char digits[16];
  int n = 0;
  uint32_t value = (uint32_t)tid;
  do digits[n++] = (char)('0' + value % 10);
  while ((value /= 10) != 0 && n < (int)sizeof digits);
  size_t used = 0;
  const char *prefix = "/proc/self/task/";
  memcpy(path, prefix, strlen(prefix));
  used = strlen(prefix);
  while (n > 0) path[used++] = digits[--n];
  path[used++] = '/';
  size_t leaf_length = strlen(leaf);
  memcpy(path + used, leaf, leaf_length);
  path[used + leaf_length] = '\0';
}

/* Reads up to `capacity` - 1 bytes of a /proc file; the length, or -1. */
static ssize_t read_small_file(const char *path, char *buffer, size_t capacity) {
  int fd;
  do fd = open(path, O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  size_t used = 0;
  while (used < capacity - 1) {
    ssize_t n = read(fd, buffer + used, capacity - 1 - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += (size_t)n;
  }
  close(fd);
  buffer[used] = '\0';
  return (ssize_t)used;
}

/* The signals thread `tid` blocks (SigBlk in its status); 0 when it cannot be read. */
static uint64_t thread_blocked_signals(pid_t tid) {
  char path[64], status[4096];
  task_path(path, tid, "status");
  ssize_t length = read_small_file(path, status, sizeof status);
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
  task_path(path, tid, "stat");
  ssize_t length = read_small_file(path, stat, sizeof stat);
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
  return blocks(mask, capture_signal) && blocks(mask, fallback_signals[0]) && blocks(mask, fallback_signals[1]) &&
         blocks(mask, fallback_signals[2]);
}

/* What a report knows of the process's threads. */
typedef struct {
  il_thread_slot *slots;
  int count;                    /* slots used, in /proc/self/task order */
  int overflow;                 /* tids in overflow_tids (not unwound) */
  int unlisted;                 /* threads beyond even those: counted only */
  int crashed;                  /* the reporting thread's index */
  int asked;                    /* 1 when other threads were signalled (end_capture releases them) */
  uint64_t waited_ms;           /* how long the answers were waited for */
  uint32_t generation;
} il_capture;

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
static void begin_capture(il_capture *capture, il_thread_slot *single, il_reader *reader, const void *context) {
  pid_t pid = (pid_t)syscall(SYS_getpid), self = (pid_t)syscall(SYS_gettid);
  uint64_t started = now_ns(), deadline = started + (uint64_t)IL_ANSWER_BUDGET_MS * 1000000u,
           limit = started + (uint64_t)IL_ANSWER_LIMIT_MS * 1000000u;
  memset(capture, 0, sizeof *capture);
  int expected = 0;
  int fd = -1;
  if (thread_slots != NULL && capture_signal > 0 && atomic_compare_exchange_strong(&capturing, &expected, 1)) {
    do fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) atomic_store(&capturing, 0);
  }
  if (fd < 0) {
    capture->slots = single;
    capture->count = 1;
    single->tid = self;
    single->outcome = OUTCOME_CRASHED;
    unwind_context(reader, context, single);
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
  for (int i = 0; i < IL_CRASH_SIGNAL_COUNT; i++) sigdelset(&action.sa_mask, crash_signals[i]);
  sigaction(capture_signal, &action, &capture_previous);

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
        if (capture->overflow < IL_OVERFLOW_TIDS) overflow_tids[capture->overflow++] = tid;
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
      info.si_signo = capture_signal;
      info.si_code = SI_QUEUE;
      info.si_pid = pid;
      info.si_uid = getuid();
      info.si_value.sival_int = (int)((capture->generation & 0x7fff) << 16 | (uint32_t)capture->count);
      if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, capture_signal, &info) == 0) {
        asked++;
      } else {
        atomic_store(&slot->state, SLOT_CLOSED);
        slot->outcome = OUTCOME_GONE;
      }
      capture->count++;
    }
  }
  close(fd);
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
  unwind_context(reader, context, own);

  /* A thread that blocks the capture signal is asked with the first fallback signal it leaves open.
     One that blocks them all answers only once it unblocks one: inside pthread_create (glibc blocks
     every signal around clone) that is soon, in a thread asleep in sigwait never. Once the others
     have answered (or the budget is spent), waiting goes on only while can_still_answer. */
  int blocked = 0, fallback_installed[3] = {0, 0, 0};
  for (int i = 0; i < capture->count; i++) {
    il_thread_slot *slot = &capture->slots[i];
    if (atomic_load(&slot->state) != SLOT_REQUESTED) continue;
    uint64_t mask = thread_blocked_signals(slot->tid);
    if (!blocks(mask, capture_signal)) continue;
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
  sigaction(capture_signal, &ignore, NULL);
  sigaction(capture_signal, &capture_previous, NULL);
  for (int k = 0; k < 3; k++) {
    if (!fallback_installed[k]) continue;
    sigaction(fallback_signals[k], &ignore, NULL);
    sigaction(fallback_signals[k], &fallback_previous[k], NULL);
  }
}

/* Lets the answered threads go, and waits (IL_ANSWER_BUDGET_MS at most) until they have left the handler: the
   next handler (Swift's backtracer) reads their signal masks to suspend them, and inside ours they
   block every signal. */
static void end_capture(il_capture *capture) {
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

/* ------------------------------------------------------------------ report */

/* "N   name                          0x%016llx 0xLOAD + OFFSET" (Apple's frame line), then the
   trust mark of a frame found by frame pointer or stack scanning. */
static void w_frame(il_writer *w, int index, uint64_t address, int trust, const il_table_slot *slot) {
  const il_table_entry *entry = table_lookup(slot, address);
  w_udec(w, (uint64_t)index, 0);
  w_spaces(w, index < 10 ? 3 : index < 100 ? 2 : 1);
  size_t name_length = 3;
  if (entry != NULL) {
    name_length = entry->name_length;
    w_bytes(w, slot->text + entry->name_offset, name_length);
  } else {
    w_str(w, "???");
  }
  w_spaces(w, name_length < 30 ? 30 - name_length : 1);
  w_hex(w, address, 16);
  w_bytes(w, " ", 1);
  uint64_t base = entry != NULL ? entry->load_address : address;
  w_hex(w, base, 0);
  w_str(w, " + ");
  w_udec(w, address - base, 0);
  if (trust == TRUST_FRAME_POINTER) w_str(w, "  (frame pointer)");
  else if (trust == TRUST_SCAN) w_str(w, "  (stack scan)");
  w_bytes(w, "\n", 1);
}

/* "Thread N name:  NAME" from /proc/self/task/TID/comm, read now; nothing when it is gone. The name
   is escaped the project's one way (il_line_escaped, as TextEscaping escapes it in Swift): it cannot
   end the line early, and the parser reads it back. comm is at most 15 bytes, 4 bytes each escaped. */
static void w_thread_name(il_writer *w, int index, pid_t tid) {
  char path[64], name[64], escaped[256];
  task_path(path, tid, "comm");
  ssize_t length = read_small_file(path, name, sizeof name);
  if (length > 0 && name[length - 1] == '\n') length--;
  if (length <= 0) return;
  il_line line = {escaped, sizeof escaped, 0, 0};
  il_line_escaped(&line, name, (size_t)length);
  w_str(w, "Thread ");
  w_udec(w, (uint64_t)index, 0);
  w_str(w, " name:  ");
  w_bytes(w, escaped, line.used);
  w_bytes(w, "\n", 1);
}

static void w_thread(il_writer *w, int index, const il_thread_slot *thread, int crashed, uint64_t waited_ms,
                     const il_table_slot *table) {
  w_bytes(w, "\n", 1);
  w_thread_name(w, index, thread->tid);
  w_str(w, "Thread ");
  w_udec(w, (uint64_t)index, 0);
  w_str(w, crashed ? " Crashed:  tid " : ":  tid ");
  w_udec(w, (uint64_t)thread->tid, 0);
  w_bytes(w, "\n", 1);
  switch (thread->outcome) {
  case OUTCOME_UNWOUND:
  case OUTCOME_CRASHED:
    for (int i = 0; i < thread->frame_count; i++) w_frame(w, i, thread->pc[i], thread->trust[i], table);
    break;
  case OUTCOME_SILENT:
    w_str(w, "(not unwound: the thread did not answer within ");
    w_udec(w, waited_ms, 0);
    w_str(w, " ms)\n");
    break;
  case OUTCOME_BLOCKED:
    w_str(w, "(not unwound: the thread blocks signal ");
    w_udec(w, (uint64_t)capture_signal, 0);
    w_str(w, " and SIGPROF, SIGUSR2, SIGUSR1, which ask threads for their stacks)\n");
    break;
  default:
    w_str(w, "(not unwound: the thread exited before it answered)\n");
    break;
  }
}

/* One register cell: the name right-aligned in `width`, ": ", 0x and `digits` hex digits. */
static void w_register(il_writer *w, const char *name, int width, uint64_t value, int digits) {
  size_t length = strlen(name);
  w_spaces(w, length < (size_t)width ? (size_t)width - length : 0);
  w_str(w, name);
  w_str(w, ": ");
  w_hex(w, value, digits);
}

/* The crashed thread's registers in Apple's layout (CONTRACTS.md §2); cr2 is the fault address. */
static void w_registers(il_writer *w, int index, const void *context, uint64_t fault_address) {
  if (context == NULL) return;
  const ucontext_t *uc = context;
  w_str(w, "\nThread ");
  w_udec(w, (uint64_t)(index < 0 ? 0 : index), 0);
#if defined(__x86_64__)
  const greg_t *g = uc->uc_mcontext.gregs;
  static const char *const names[] = {"rax", "rbx", "rcx", "rdx", "rdi", "rsi", "rbp", "rsp", "r8", "r9",
                                      "r10", "r11", "r12", "r13", "r14", "r15", "rip", "rfl", "cr2"};
  const uint64_t values[] = {(uint64_t)g[REG_RAX], (uint64_t)g[REG_RBX], (uint64_t)g[REG_RCX], (uint64_t)g[REG_RDX],
                             (uint64_t)g[REG_RDI], (uint64_t)g[REG_RSI], (uint64_t)g[REG_RBP], (uint64_t)g[REG_RSP],
                             (uint64_t)g[REG_R8],  (uint64_t)g[REG_R9],  (uint64_t)g[REG_R10], (uint64_t)g[REG_R11],
                             (uint64_t)g[REG_R12], (uint64_t)g[REG_R13], (uint64_t)g[REG_R14], (uint64_t)g[REG_R15],
                             (uint64_t)g[REG_RIP], (uint64_t)g[REG_EFL], fault_address};
  w_str(w, " crashed with X86 Thread State (64-bit):\n");
  for (int i = 0; i < 19; i++) {
    w_str(w, i % 4 == 0 ? "  " : "  ");
    w_register(w, names[i], 3, values[i], 16);
    if (i % 4 == 3 || i == 18) w_bytes(w, "\n", 1);
  }
#elif defined(__aarch64__)
  (void)fault_address;
  w_str(w, " crashed with ARM Thread State (64-bit):\n");
  for (int row = 0; row < 7; row++) {
    w_str(w, " ");
    for (int k = 0; k < 4; k++) {
      char name[4] = {'x', 0, 0, 0};
      int n = row * 4 + k;
      if (n < 10) name[1] = (char)('0' + n);
      else {
        name[1] = (char)('0' + n / 10);
        name[2] = (char)('0' + n % 10);
      }
      w_str(w, " ");
      w_register(w, name, 4, (uint64_t)uc->uc_mcontext.regs[n], 16);
    }
    w_bytes(w, "\n", 1);
  }
  w_str(w, "  ");
  w_register(w, "x28", 4, (uint64_t)uc->uc_mcontext.regs[28], 16);
  w_str(w, " ");
  w_register(w, "fp", 4, (uint64_t)uc->uc_mcontext.regs[29], 16);
  w_str(w, " ");
  w_register(w, "lr", 4, (uint64_t)uc->uc_mcontext.regs[30], 16);
  w_str(w, "\n  ");
  w_register(w, "sp", 4, (uint64_t)uc->uc_mcontext.sp, 16);
  w_str(w, " ");
  w_register(w, "pc", 4, (uint64_t)uc->uc_mcontext.pc, 16);
  w_str(w, " ");
  w_register(w, "cpsr", 4, (uint64_t)(uint32_t)uc->uc_mcontext.pstate, 8);
  w_bytes(w, "\n", 1);
#else
  (void)uc;
  (void)fault_address;
  w_str(w, " crashed\n");
#endif
}

void il_crash_write_report(int fd, int signal, const void *info_pointer, const void *context) {
  int saved_errno = errno;
  const siginfo_t *info = info_pointer;
  il_writer w = {.fd = fd};
  int held;
  const il_table_slot *slot = table_acquire(&held);
  il_reader reader = {slot, 0, 0};
  il_thread_slot single;
  memset(&single, 0, sizeof single);
  il_capture capture;
  begin_capture(&capture, &single, &reader, context);
  int code = info != NULL ? info->si_code : 0;
  /* si_addr is meaningful only for faults the kernel raised (si_code > 0). */
  uint64_t address = info != NULL && code > 0 && code != 0x80 ? (uint64_t)(uintptr_t)info->si_addr : 0;

  w_str(&w, "Process:         ");
  w_str(&w, process_name);
  w_str(&w, " [");
  w_udec(&w, (uint64_t)syscall(SYS_getpid), 0);
  w_str(&w, "]\nPath:            ");
  w_str(&w, process_path);
  w_str(&w, "\nDate/Time:       ");
  struct timespec now = {0, 0};
  syscall(SYS_clock_gettime, CLOCK_REALTIME, &now);
  w_date(&w, (int64_t)now.tv_sec);
  w_str(&w, "\nOS Version:      ");
  w_str(&w, os_version);
  w_str(&w, "\nException Type:  ");
  const char *name = signal_name(signal), *code_string = code_name(signal, code);
  if (name != NULL) {
    w_str(&w, name);
  } else {
    w_str(&w, "signal ");
    w_sdec(&w, signal);
  }
  w_str(&w, " (");
  if (code_string != NULL) w_str(&w, code_string);
  else w_sdec(&w, code);
  w_str(&w, ")\nException Codes: signal ");
  w_sdec(&w, signal);
  w_str(&w, ", code ");
  w_sdec(&w, code);
  w_str(&w, ", address ");
  w_hex(&w, address, 16);
  int total = capture.count + capture.overflow + capture.unlisted + (capture.crashed < 0 ? 1 : 0);
  int crashed_index = capture.crashed < 0 ? total - 1 : capture.crashed;
  w_str(&w, "\nCrashed Thread:  ");
  w_udec(&w, (uint64_t)crashed_index, 0);
  w_str(&w, "  tid ");
  w_udec(&w, (uint64_t)syscall(SYS_gettid), 0);
  w_str(&w, "\nThreads:         ");
  w_udec(&w, (uint64_t)total, 0);
  w_bytes(&w, "\n", 1);
  for (int i = 0; i < capture.count; i++) w_thread(&w, i, &capture.slots[i], i == capture.crashed, capture.waited_ms, slot);
  for (int i = 0; i < capture.overflow; i++) {
    il_thread_slot listed;
    listed.tid = overflow_tids[i];
    w_bytes(&w, "\n", 1);
    w_thread_name(&w, capture.count + i, listed.tid);
    w_str(&w, "Thread ");
    w_udec(&w, (uint64_t)(capture.count + i), 0);
    w_str(&w, ":  tid ");
    w_udec(&w, (uint64_t)listed.tid, 0);
    w_str(&w, "\n(not unwound: more threads than the report's ");
    w_udec(&w, IL_THREAD_SLOTS, 0);
    w_str(&w, " slots)\n");
  }
  if (capture.unlisted > 0) {
    w_str(&w, "\n(");
    w_udec(&w, (uint64_t)capture.unlisted, 0);
    w_str(&w, " more threads not listed)\n");
  }
  if (capture.crashed < 0) w_thread(&w, crashed_index, &single, 1, 0, slot);
  w_registers(&w, crashed_index, context, address);
  w_str(&w, "\nBinary Images:\n");
  write_table(&w, slot);
  w_flush(&w);
  end_capture(&capture);
  table_release(held);
  errno = saved_errno;
}

/* ------------------------------------------------------------------ handler */

static void restore_previous_actions(void) {
  for (int i = 0; i < IL_CRASH_SIGNAL_COUNT; i++) sigaction(crash_signals[i], &previous_actions[i], NULL);
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

static void crash_handler(int signal, siginfo_t *info, void *context) {
  int saved_errno = errno;
  pid_t self = (pid_t)syscall(SYS_gettid), expected = 0;
  if (atomic_compare_exchange_strong(&reporting_thread, &expected, self)) {
    /* SIGPIPE is blocked while we run (sa_mask): a report descriptor that is a pipe nobody reads
       fails with EPIPE instead of killing the process by SIGPIPE. The SIGPIPE that write raised
       is taken back, so the process still dies by its own signal. */
    sigset_t pending_before;
    int had_sigpipe = sigpending(&pending_before) == 0 && sigismember(&pending_before, SIGPIPE) == 1;
    il_crash_write_report(atomic_load(&report_fd), signal, info, context);
    if (!had_sigpipe) {
      sigset_t pipe_only;
      sigemptyset(&pipe_only);
      sigaddset(&pipe_only, SIGPIPE);
      struct timespec no_wait = {0, 0};
      syscall(SYS_rt_sigtimedwait, &pipe_only, NULL, &no_wait, sizeof(uint64_t));
    }
    restore_previous_actions();
    atomic_store(&installed, 0);
  } else if (expected != self) {
    /* Another thread is writing its report: let it finish (bounded: 1000 brief pauses), then fall through to
       the previous handler, which it has restored. */
    for (int i = 0; i < 1000 && atomic_load(&reporting_thread) != 0 && atomic_load(&installed); i++)
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

/* ------------------------------------------------------------------ install */

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
  do fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  while (fd < 0 && errno == EINTR);
  return fd;
}

static void capture_process_identity(void) {
  ssize_t n = readlink("/proc/self/exe", process_path, sizeof process_path - 1);
  process_path[n > 0 ? n : 0] = '\0';
  const char *slash = strrchr(process_path, '/');
  process_name = slash != NULL ? slash + 1 : (process_path[0] != '\0' ? process_path : "???");
  struct utsname names;
  os_version[0] = '\0';
  if (uname(&names) == 0) {
    size_t used = 0;
    const char *parts[] = {names.sysname, " ", names.release, " ", names.machine};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
      size_t length = strlen(parts[i]);
      if (length > sizeof os_version - 1 - used) length = sizeof os_version - 1 - used;
      memcpy(os_version + used, parts[i], length);
      used += length;
    }
    os_version[used] = '\0';
  }
}

/* The slots the other threads answer into, mapped once (pages are touched only by a report), and
   whether process_vm_readv on ourselves works here (a seccomp profile may forbid it). */
static int prepare_capture(void) {
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
  capture_signal = SIGRTMAX - 2;
  static const uint64_t probe_value = 0x696d6167656c6f67u;
  uint64_t copy = 0;
  struct iovec local = {&copy, sizeof copy}, remote = {(void *)&probe_value, sizeof probe_value};
  self_read_works = syscall(SYS_process_vm_readv, (pid_t)syscall(SYS_getpid), &local, 1UL, &remote, 1UL, 0UL) ==
                        (long)sizeof copy && copy == probe_value;
  return 0;
}

int il_crash_install(int fd) {
  if (fd < 0) return EBADF;
  pthread_mutex_lock(&install_mutex);
  atomic_store(&report_fd, fd);
  if (atomic_load(&installed)) {
    pthread_mutex_unlock(&install_mutex);
    return 0;
  }
  int error = 0;
  if (probe_pipe[0] < 0 && pipe2(probe_pipe, O_CLOEXEC | O_NONBLOCK) != 0) error = errno;
  if (error == 0) error = prepare_capture();
  if (error == 0) error = il_crash_prepare_thread();
  if (error != 0) {
    pthread_mutex_unlock(&install_mutex);
    return error;
  }
  capture_process_identity();
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = crash_handler;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < IL_CRASH_SIGNAL_COUNT; i++) sigaddset(&action.sa_mask, crash_signals[i]);
  sigaddset(&action.sa_mask, SIGPIPE);
  atomic_store(&reporting_thread, 0);
  for (int i = 0; i < IL_CRASH_SIGNAL_COUNT; i++) {
    if (sigaction(crash_signals[i], &action, &previous_actions[i]) != 0) {
      error = errno;
      for (int j = 0; j < i; j++) sigaction(crash_signals[j], &previous_actions[j], NULL);
      pthread_mutex_unlock(&install_mutex);
      return error;
    }
  }
  atomic_store(&installed, 1);
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
