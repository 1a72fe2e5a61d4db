/* The report's text, written at crash time with crash_writer.h: the layout of README.md's "Crash
   reports" (Apple's header, threads, registers and Binary Images, with the threads' names, trust
   marks and the threads that did not answer), which the Swift ReportWriter writes too. */
#define _GNU_SOURCE
#include "crash_internal.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static char process_path[PATH_MAX];
static const char *process_name = "???";
static char os_version[256];

const char *il_crash_process_name(void) { return process_name; }

void il_crash_capture_process_identity(void) {
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

/* "N   name                          0x%016llx 0xLOAD + OFFSET" (Apple's frame line), then the
   trust mark of a frame found by frame pointer or stack scanning. */
static void w_frame(il_writer *w, int index, uint64_t address, int trust, const il_table_slot *slot) {
  const il_table_entry *entry = il_crash_table_lookup(slot, address);
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
    w_udec(w, (uint64_t)il_crash_capture_signal, 0);
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

/* The crashed thread's registers in Apple's layout (README.md's "Crash reports": a title line, then
   four cells to a row on x86_64); cr2 is the fault address. */
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
  const il_table_slot *slot = il_crash_table_acquire(&held);
  il_reader reader = {slot, 0, 0};
  il_thread_slot single;
  memset(&single, 0, sizeof single);
  il_capture capture;
  il_crash_begin_capture(&capture, &single, &reader, context);
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
    listed.tid = il_crash_overflow_tids[i];
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
  il_crash_write_table(&w, slot);
  w_flush(&w);
  il_crash_end_capture(&capture);
  il_crash_table_release(held);
  errno = saved_errno;
}
