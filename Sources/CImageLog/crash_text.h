#ifndef CIMAGELOG_CRASH_TEXT_H
#define CIMAGELOG_CRASH_TEXT_H
/* The report's pieces that need no image table: signal and si_code names, a frame line, the crashed
   thread's registers. Header-only and libc-free (crash_writer.h's sink): the library's report
   (crash_report.c) and the short report the audit module of `imagelog run --crash-dir` writes when its
   helper wrote none (Sources/CImageLogAudit/audit_crash_report.h) write them alike. */
#include "crash_writer.h"
#include "CImageLogUnwind.h"

#include <signal.h>
#include <stdint.h>
#include <sys/ucontext.h>

static inline const char *signal_name(int signal) {
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
static inline const char *code_name(int signal, int code) {
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

/* "N   name                          0x%016llx 0xLOAD + OFFSET" (Apple's frame line), then the
   trust mark of a frame found by frame pointer or stack scanning. `name` NULL: "???", and `base` is
   the address itself. A `note` (a frame in an unloaded image: "unloaded 3.200 ms before the crash by
   thread 4") is written in parentheses before the trust mark. */
static inline void w_frame_line_noted(il_writer *w, int index, uint64_t address, const char *name,
                                      size_t name_length, uint64_t base, int trust, const char *note,
                                      size_t note_length) {
  w_udec(w, (uint64_t)index, 0);
  w_spaces(w, index < 10 ? 3 : index < 100 ? 2 : 1);
  if (name == NULL) {
    name = "???";
    name_length = 3;
  }
  w_bytes(w, name, name_length);
  w_spaces(w, name_length < 30 ? 30 - name_length : 1);
  w_hex(w, address, 16);
  w_bytes(w, " ", 1);
  w_hex(w, base, 0);
  w_str(w, " + ");
  w_udec(w, address - base, 0);
  if (note != NULL) {
    w_str(w, "  (");
    w_bytes(w, note, note_length);
    w_str(w, ")");
  }
  if (trust == IL_FRAME_FRAME_POINTER) w_str(w, "  (frame pointer)");
  else if (trust == IL_FRAME_SCAN) w_str(w, "  (stack scan)");
  w_bytes(w, "\n", 1);
}

static inline void w_frame_line(il_writer *w, int index, uint64_t address, const char *name, size_t name_length,
                                uint64_t base, int trust) {
  w_frame_line_noted(w, index, address, name, name_length, base, trust, NULL, 0);
}

/* One register cell: the name right-aligned in `width`, ": ", 0x and `digits` hex digits. */
static inline void w_register(il_writer *w, const char *name, int width, uint64_t value, int digits) {
  size_t length = strlen(name);
  w_spaces(w, length < (size_t)width ? (size_t)width - length : 0);
  w_str(w, name);
  w_str(w, ": ");
  w_hex(w, value, digits);
}

/* The crashed thread's registers in Apple's layout (README.md's "Crash reports": a title line, then
   four cells to a row on x86_64); cr2 is the fault address. */
static inline void w_registers(il_writer *w, int index, const void *context, uint64_t fault_address) {
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

/* "/proc/self/task/TID/LEAF" into `path` (at least 64 bytes). */
static inline void il_crash_task_path(char *path, pid_t tid, const char *leaf) {
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
static inline ssize_t il_crash_read_small_file(const char *path, char *buffer, size_t capacity) {
  long fd;
  do fd = IL_SYS(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
  while (fd == -EINTR);
  if (fd < 0) return -1;
  size_t used = 0;
  while (used < capacity - 1) {
    long n = IL_SYS(SYS_read, fd, buffer + used, capacity - 1 - used);
    if (n == -EINTR) continue;
    if (n <= 0) break;
    used += (size_t)n;
  }
  IL_SYS(SYS_close, fd);
  buffer[used] = '\0';
  return (ssize_t)used;
}

/* "Thread N name:  NAME" from /proc/self/task/TID/comm, read now; nothing when it is gone. The name
   is escaped the project's one way (il_line_escaped, as TextEscaping escapes it in Swift): it cannot
   end the line early, and the parser reads it back. comm is at most 15 bytes, 4 bytes each escaped. */
static inline void w_thread_name(il_writer *w, int index, pid_t tid) {
  char path[64], name[64], escaped[256];
  il_crash_task_path(path, tid, "comm");
  ssize_t length = il_crash_read_small_file(path, name, sizeof name);
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
#endif
