/* The report's text, written at crash time with crash_writer.h: the layout of README.md's "Crash
   reports" (Apple's header, threads, registers and Binary Images, with the threads' names, trust
   marks and the threads that did not answer), which the Swift ReportWriter writes too. */
#define _GNU_SOURCE
#include "crash_internal.h"
#include "crash_text.h"

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

/* The time of the crash being reported (CLOCK_REALTIME ns), for the unloaded images' ages. */
static int64_t crash_ns;

static void w_frame(il_writer *w, int index, uint64_t address, int trust, const il_table_slot *slot) {
  const il_table_entry *entry = il_crash_table_lookup(slot, address);
  il_unloaded_entry gone;
  const il_unloaded_history *history = il_crash_unloaded_history();
  if (entry != NULL) {
    /* Where an image removed before the crash had been: both said. */
    const char *name = slot->text + entry->name_offset;
    char note[IL_UNLOADED_PATH * 4 + 128];
    il_line line = {note, sizeof note, 0, 0};
    int was_here = history != NULL && il_unloaded_lookup(history, address, &gone) &&
                   il_unloaded_was_here(&line, &gone, name, entry->name_length, entry->load_address, crash_ns);
    w_frame_line_noted(w, index, address, name, entry->name_length, entry->load_address, trust,
                       was_here ? note : NULL, line.used);
  } else if (history != NULL && il_unloaded_lookup(history, address, &gone)) {
    /* In no mapped image but in one removed before the crash: named, with when it went. */
    char note[128];
    il_line line = {note, sizeof note, 0, 0};
    il_unloaded_when(&line, &gone, crash_ns);
    char name[IL_UNLOADED_PATH * 4];
    il_line named = {name, sizeof name, 0, 0};
    w_frame_line_noted(w, index, address, name, il_unloaded_name(&named, &gone), gone.base, trust, note, line.used);
  } else {
    w_frame_line(w, index, address, NULL, 0, address, trust);
  }
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

  crash_ns = il_unloaded_now_ns();
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
  il_crash_write_unloaded(&w, crash_ns);
  il_crash_write_timeline(&w, crash_ns);
  w_flush(&w);
  il_crash_end_capture(&capture);
  il_crash_table_release(held);
  errno = saved_errno;
}
