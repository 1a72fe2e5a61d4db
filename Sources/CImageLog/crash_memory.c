/* Memory. Every read at crash time goes through il_crash_read_memory, which never faults: a range
   inside a readable segment of an image in the published table is copied directly (the table is
   what we trust; each image's segments are first checked still mapped, once per walk, as dlclose
   unmaps before its notification reaches the table); anything else (stacks) takes one
   process_vm_readv on ourselves, or, where a seccomp profile forbids that, the probe pipe: the
   bytes are written to a pipe created at install time and read back, and write(2) returns EFAULT
   for memory that is not readable.

   Unwinding. Each thread is unwound by the one shared unwinder (CImageLogUnwind: the call frame
   information of .eh_frame_hdr/.eh_frame as the loader mapped them, then frame pointers where an
   image has none for the pc, then stack scanning as the last resort), through
   il_crash_read_memory, with each image's PT_GNU_EH_FRAME found when the image was added to the
   table. Frames found by frame pointer or by scanning carry that mark in the report. The walk stops
   at IL_MAX_FRAMES (128) frames. */
#define _GNU_SOURCE
#include "crash_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

static int probe_pipe[2] = {-1, -1};
static atomic_flag probe_lock = ATOMIC_FLAG_INIT;
static int self_read_works;                /* process_vm_readv on ourselves worked at install */

/* ---- safe memory reads ---- */

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
int il_crash_read_memory(void *context, uint64_t address, void *out, size_t length) {
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

/* The probe pipe, created once, and whether process_vm_readv on ourselves works here (a seccomp
   profile may forbid it). */
int il_crash_prepare_memory(void) {
  if (probe_pipe[0] < 0 && pipe2(probe_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return errno;
  static const uint64_t probe_value = 0x696d6167656c6f67u;
  uint64_t copy = 0;
  struct iovec local = {&copy, sizeof copy}, remote = {(void *)&probe_value, sizeof probe_value};
  self_read_works = syscall(SYS_process_vm_readv, (pid_t)syscall(SYS_getpid), &local, 1UL, &remote, 1UL, 0UL) ==
                        (long)sizeof copy && copy == probe_value;
  return 0;
}

/* ---- a thread's frames ---- */

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
  const il_table_entry *entry = il_crash_table_lookup(reader->table, pc);
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
   through il_crash_read_memory. */
void il_crash_unwind_context(il_reader *reader, const void *context, il_thread_slot *out) {
  out->frame_count = 0;
  il_register_set registers;
  if (!registers_from(context, &registers)) return;
  int pc = registers.arch == IL_ARCH_AARCH64 ? IL_AARCH64_PC : IL_X86_64_RIP;
  il_unwinder unwinder = {{il_crash_read_memory, reader}, find_unwind_image, reader, 8192};
  il_unwind_cursor cursor;
  il_unwind_start(&cursor, &registers);
  record(out, cursor.registers.value[pc], cursor.trust);
  while (out->frame_count < IL_MAX_FRAMES && il_unwind_step(&unwinder, &cursor))
    record(out, cursor.registers.value[pc], cursor.trust);
}
