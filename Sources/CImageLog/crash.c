/* Crash-time image table and crash handler.

   Everything reachable from the signal handler uses only async-signal-safe system calls (write,
   read, getpid, gettid, clock_gettime, sigaction, sigpending, rt_sigtimedwait, rt_tgsigqueueinfo,
   nanosleep): no malloc, no
   stdio, no locks, no localtime; numbers are formatted by hand.

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

   Frame-pointer walk. Each frame record is read with a probe rather than a load: the 16 bytes are
   written to a pipe created at install time and read back. write(2) returns EFAULT for memory that
   is not readable, so a wild frame pointer ends the walk instead of faulting inside the handler.
   (This works under seccomp profiles that forbid process_vm_readv, and on any thread, whose stack
   range we could not learn safely at crash time.) The walk also requires each frame pointer to be
   aligned, strictly above the previous one, and its return address inside an image in the table;
   where the chain breaks (code without frame pointers, like most of glibc) the stack above is
   scanned for return addresses that follow a call instruction, up to the next plausible record.
   The walk stops at 128 frames. */
#define _GNU_SOURCE
#include "CImageLogCrash.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* ------------------------------------------------------------------ image table */

typedef struct {
  uint64_t load_address, text_start, text_end;
  uint32_t name_offset, name_length, line_offset, line_length;
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
  master[index] = (il_master_entry){load_address, text_start, text_end, name_copy, line_copy};
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
static char process_path[PATH_MAX];
static const char *process_name = "???";
static char os_version[256];
static _Atomic pid_t reporting_thread;     /* the tid writing a report, or 0 */
static pthread_mutex_t install_mutex = PTHREAD_MUTEX_INITIALIZER;

enum { IL_MAX_FRAMES = 128 };

/* ------------------------------------------------------------------ safe memory probe */

/* Copies `length` (<= 64) bytes at `address` into `out` through the probe pipe; 0 if unreadable. */
static int probe_read(uint64_t address, void *out, size_t length) {
  if (probe_pipe[0] < 0 || length > 64) return 0;
  ssize_t n;
  do n = write(probe_pipe[1], (const void *)(uintptr_t)address, length);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return 0;
  char sink[64];
  ssize_t got = 0;
  while (got < n) {  /* drain exactly what went in, even a partial write */
    ssize_t r = read(probe_pipe[0], sink + got, (size_t)(n - got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    got += r;
  }
  if ((size_t)n != length) return 0;
  memcpy(out, sink, length);
  return 1;
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

/* "N   name                          0x%016llx 0xLOAD + OFFSET" (Apple's frame line). */
static void w_frame(il_writer *w, int index, uint64_t address, const il_table_slot *slot) {
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
  w_bytes(w, "\n", 1);
}

typedef struct {
  uint64_t pc, fp, sp, lr;
} il_registers;

static int registers_from(const void *context, il_registers *out) {
  if (context == NULL) return 0;
  const ucontext_t *uc = context;
#if defined(__x86_64__)
  out->pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
  out->fp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
  out->sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
  out->lr = 0;
  return 1;
#elif defined(__aarch64__)
  out->pc = (uint64_t)uc->uc_mcontext.pc;
  out->fp = (uint64_t)uc->uc_mcontext.regs[29];
  out->sp = (uint64_t)uc->uc_mcontext.sp;
  out->lr = (uint64_t)uc->uc_mcontext.regs[30];
  return 1;
#else
  (void)uc;
  return 0;
#endif
}

#if defined(__x86_64__)
/* True when the bytes before `address` end in a call instruction: E8 rel32, or FF /2 in its
   register and memory forms (2 to 7 bytes, with or without a REX prefix). */
static int follows_call(uint64_t address) {
  unsigned char bytes[8];
  if (address < 8 || !probe_read(address - 8, bytes, sizeof bytes)) return 0;
  if (bytes[3] == 0xE8) return 1;
  for (int length = 2; length <= 7; length++) {
    unsigned char opcode = bytes[8 - length], modrm = bytes[9 - length];
    if (opcode != 0xFF || ((modrm >> 3) & 7) != 2) continue;
    int mod = modrm >> 6, rm = modrm & 7, expected;  /* the length this ModRM implies */
    if (mod == 3) expected = 2;
    else if (mod == 0) expected = rm == 5 ? 6 : rm == 4 ? ((bytes[10 - length] & 7) == 5 ? 7 : 3) : 2;
    else if (mod == 1) expected = rm == 4 ? 4 : 3;
    else expected = rm == 4 ? 7 : 6;
    if (expected == length) return 1;
  }
  return 0;
}
#endif

/* True when `fp` looks like a frame record at or above `floor`: aligned, readable, and holding a
   return address inside an image (on x86_64 one that follows a call instruction). Its saved frame
   pointer is not judged here: in a caller without frame pointers it is any value, and the next
   step checks it against the new floor. */
static int plausible_record(const il_table_slot *slot, uint64_t fp, uint64_t floor) {
  uint64_t record[2];
  if (fp < floor || fp % sizeof(uint64_t) != 0 || !probe_read(fp, record, sizeof record)) return 0;
  if (record[1] == 0 || table_lookup(slot, record[1]) == NULL) return 0;
#if defined(__x86_64__)
  if (!follows_call(record[1])) return 0;
#endif
  return 1;
}

/* In code built without frame pointers (glibc's abort, raise, pthread_kill, free) the frame
   pointer register holds something else. Scan up to 8 KiB of stack from `sp` upwards: words that are return addresses (inside an image, just after a call instruction)
   are frames, until a plausible frame record is found, whose address is returned (0 if none).
   Breakpad calls this "found by stack scanning"; it can list a stale return address. */
static uint64_t scan_for_record(il_writer *w, int *index, const il_table_slot *slot, uint64_t sp) {
#if defined(__x86_64__)
  for (uint64_t at = sp; at < sp + 8192 && *index < IL_MAX_FRAMES; at += sizeof(uint64_t)) {
    if (plausible_record(slot, at, sp)) return at;
    uint64_t word;
    if (!probe_read(at, &word, sizeof word)) return 0;
    if (table_lookup(slot, word) != NULL && follows_call(word)) w_frame(w, (*index)++, word, slot);
  }
#else
  (void)w; (void)index; (void)slot; (void)sp;
#endif
  return 0;
}

#if defined(__aarch64__)
/* On aarch64 compilers omit the frame record of leaf functions (-momit-leaf-frame-pointer), so
   when the crash is in a leaf its caller is only in LR, and the frame pointer is the caller's.
   LR is the caller when the instruction before it is a BL whose target is at most 4 KiB below
   the PC (the leaf's entry); after a call from a non-leaf function LR points back into the
   function itself, and the BL before it targets some other function. */
static int leaf_caller(const il_table_slot *slot, const il_registers *regs) {
  uint32_t instruction;
  if (regs->lr < 4 || table_lookup(slot, regs->lr) == NULL) return 0;
  if (!probe_read(regs->lr - 4, &instruction, sizeof instruction)) return 0;
  if ((instruction & 0xFC000000u) != 0x94000000u) return 0;  /* BL imm26 */
  int64_t displacement = (int64_t)((uint64_t)(instruction & 0x03FFFFFFu) << 38) >> 36;  /* imm26 * 4 */
  uint64_t target = regs->lr - 4 + (uint64_t)displacement;
  return target <= regs->pc && regs->pc - target < 4096;
}
#endif

static void w_backtrace(il_writer *w, const void *context, const il_table_slot *slot) {
  il_registers regs;
  if (!registers_from(context, &regs)) return;
  int index = 0;
  uint64_t floor = regs.sp;
  w_frame(w, index++, regs.pc, slot);
  if (table_lookup(slot, regs.pc) == NULL) {
    /* A call through a bad pointer: the caller is in the return address the call left at the
       top of the stack (x86_64) or in the link register (aarch64), not yet in a frame record. */
    uint64_t caller = regs.lr;
#if defined(__x86_64__)
    if (!probe_read(regs.sp, &caller, sizeof caller)) caller = 0;
#endif
    if (caller != 0 && table_lookup(slot, caller) != NULL) {
      w_frame(w, index++, caller, slot);
#if defined(__x86_64__)
      floor = regs.sp + sizeof(uint64_t);
#endif
    }
  }
#if defined(__aarch64__)
  else if (leaf_caller(slot, &regs)) {
    w_frame(w, index++, regs.lr, slot);
  }
#endif
  /* Follow frame records while they are plausible; across code without frame pointers (most of
     glibc) scan the stack for return addresses up to the next plausible record. `floor` only
     rises, so the walk ends. */
  uint64_t fp = regs.fp;
  int scanned = 0;
  while (index < IL_MAX_FRAMES) {
    if (!plausible_record(slot, fp, floor)) {
      fp = scan_for_record(w, &index, slot, floor);
      if (fp == 0) break;
      scanned = 1;
      continue;
    }
    uint64_t record[2];                        /* saved frame pointer, return address */
    if (!probe_read(fp, record, sizeof record)) break;
    w_frame(w, index++, record[1], slot);
    /* A zero saved frame pointer ends a chain (the outermost frame), but in a record found by
       scanning it is as likely a zero local next to a return address. */
    if (record[0] == 0 && !scanned) break;
    scanned = 0;
    floor = fp + 2 * sizeof(uint64_t);
    fp = record[0];
  }
}

void il_crash_write_report(int fd, int signal, const void *info_pointer, const void *context) {
  int saved_errno = errno;
  const siginfo_t *info = info_pointer;
  il_writer w = {.fd = fd};
  int held;
  const il_table_slot *slot = table_acquire(&held);
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
  w_str(&w, "\nCrashed Thread:  0  tid ");
  w_udec(&w, (uint64_t)syscall(SYS_gettid), 0);
  w_str(&w, "\n\nThread 0 Crashed:\n");
  w_backtrace(&w, context, slot);
  w_str(&w, "\nBinary Images:\n");
  write_table(&w, slot);
  table_release(held);
  w_flush(&w);
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
    /* Another thread is writing its report: let it finish (bounded, ~10 s), then fall through to
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
