#ifndef CIMAGELOG_CRASH_INTERNAL_H
#define CIMAGELOG_CRASH_INTERNAL_H
/* The crash handler's parts and what they share (CImageLogCrash.h is the public face).

   Everything reachable from the signal handler uses only async-signal-safe system calls (write,
   read, open, close, getdents64, getpid, gettid, clock_gettime, sigaction, sigpending,
   rt_sigtimedwait, rt_tgsigqueueinfo, futex, process_vm_readv, nanosleep): no malloc, no stdio,
   no locks, no localtime; numbers are formatted by hand.

   Where each part lives, each file opening with its design:
   - crash_table.c    the image table: written by the image observers, read at crash time without
                      waiting (double-buffered), and its Binary Images lines.
   - crash_memory.c   reading memory at crash time without faulting, and unwinding a thread's
                      stack through that reader.
   - crash_threads.c  asking every other thread to unwind itself (capture signal, slots, futex
                      waits) and listing those that cannot.
   - crash_report.c   the report's text: header, threads and frames, registers, Binary Images.
   - crash_handler.c  the signal handler, re-raising, install and uninstall, alternate stacks.
   - crash_helper.c   out-of-process capture: the record and the plan that start imagelog's helper
                      (CImageLogCrashHelper.h, shared with the audit module), and the in-process
                      report's file in the crash directory when the helper wrote none.
   - crash_writer.h   the report's buffered write(2) output.
   - crash_unloaded.h the images removed before a crash (a ring in static memory), shared with the
                      audit module, and their Unloaded Images lines.
   The layout of the report is README.md's "Crash reports"; the Swift writer of the same layout
   (ReportWriter) is held to it by CrashWriterParityTests. */
#include "CImageLogCrash.h"
#include "CImageLogUnwind.h"
#include "crash_writer.h"
#include "crash_text.h"
#include "crash_unloaded.h"

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

/* Shared between the files of the handler only: hidden, so a program that links the library can
   neither see nor collide with them. */
#define IL_CRASH_INTERNAL __attribute__((visibility("hidden")))

/* ---- the image table (crash_table.c) ---- */

/* An image's readable PT_LOAD segments (run-time [start, end)), where the crash-time memory reader
   copies directly, and its PT_GNU_EH_FRAME, where the unwinder finds its call frame information:
   both found when the image is added (crash_table.c's image_layout), from the program headers the
   loader used. */
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

/* One published snapshot of the table: the entries, and one arena holding their names and lines. */
typedef struct {
  size_t count, capacity;
  size_t text_used, text_capacity;
  il_table_entry *entries;
  char *text;
} il_table_slot;

/* Reader side: async-signal-safe, never waits. Returns the slot to read (NULL when nothing was
   ever published) and the index to pass to il_crash_table_release. */
IL_CRASH_INTERNAL const il_table_slot *il_crash_table_acquire(int *held);
IL_CRASH_INTERNAL void il_crash_table_release(int held);
/* The entry whose text range holds `address`, or NULL. */
IL_CRASH_INTERNAL const il_table_entry *il_crash_table_lookup(const il_table_slot *slot, uint64_t address);
/* Each entry's Binary Images line, each ending in "\n". */
IL_CRASH_INTERNAL void il_crash_write_table(il_writer *w, const il_table_slot *slot);
/* The images removed from the table, kept for a crash (crash_unloaded.h); NULL when none are kept. */
IL_CRASH_INTERNAL const il_unloaded_history *il_crash_unloaded_history(void);
/* "\nUnloaded Images:\n" and each kept removed image's line, newest first, as of `crash_ns`; nothing
   when none was removed. */
IL_CRASH_INTERNAL void il_crash_write_unloaded(il_writer *w, int64_t crash_ns);
/* "\nImage Timeline:\n" and the kept loads (since il_crash_table_start_timeline) and unloads, oldest
   first, each as of `crash_ns`; nothing when there are none. Async-signal-safe: fixed buffers. */
IL_CRASH_INTERNAL void il_crash_write_timeline(il_writer *w, int64_t crash_ns);
/* Images added from now on are loads in the timeline; those already in the table are the startup set. */
IL_CRASH_INTERNAL void il_crash_table_start_timeline(void);

/* ---- memory and stacks (crash_memory.c) ---- */

/* The crash-time memory reader (il_memory's shape) over one acquired table snapshot. */
typedef struct {
  const il_table_slot *table;
  uint64_t checked, mapped;                /* bit i: table entry i checked / found mapped */
} il_reader;

enum { IL_MAX_FRAMES = 128 };

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

/* Copies `length` bytes at `address` into `out` (an il_reader as context); 0 when any is unreadable.
   Never faults. */
IL_CRASH_INTERNAL int il_crash_read_memory(void *context, uint64_t address, void *out, size_t length);
/* The frames of the thread whose registers the ucontext `context` holds, into `out`. */
IL_CRASH_INTERNAL void il_crash_unwind_context(il_reader *reader, const void *context, il_thread_slot *out);
/* At install: the probe pipe, and whether process_vm_readv on ourselves works here. Returns 0 or an
   errno value. Not async-signal-safe. */
IL_CRASH_INTERNAL int il_crash_prepare_memory(void);

/* ---- every thread (crash_threads.c) ---- */

enum {
  IL_THREAD_SLOTS = 1024,       /* threads unwound in one report; the rest are listed by tid */
  IL_OVERFLOW_TIDS = 4096,
  IL_ANSWER_BUDGET_MS = 100,    /* how long the reporting thread waits for all answers */
  IL_ANSWER_LIMIT_MS = 1000,    /* ... and for a thread still runnable then (a loaded machine) */
  IL_RELEASE_BUDGET_MS = 5000,  /* how long an answered thread waits for the report to be written */
};
enum { OUTCOME_UNWOUND, OUTCOME_SILENT, OUTCOME_BLOCKED, OUTCOME_GONE, OUTCOME_CRASHED };

/* What a report knows of the process's threads. */
typedef struct {
  il_thread_slot *slots;
  int count;                    /* slots used, in /proc/self/task order */
  int overflow;                 /* tids in il_crash_overflow_tids (not unwound) */
  int unlisted;                 /* threads beyond even those: counted only */
  int crashed;                  /* the reporting thread's index */
  int asked;                    /* 1 when other threads were signalled (end_capture releases them) */
  uint64_t waited_ms;           /* how long the answers were waited for */
  uint32_t generation;
} il_capture;

IL_CRASH_INTERNAL extern pid_t il_crash_overflow_tids[IL_OVERFLOW_TIDS];
IL_CRASH_INTERNAL extern int il_crash_capture_signal;   /* chosen at install */

/* Lists the threads, asks each other one to unwind itself, unwinds this one, and waits for the
   answers. Without the install-time slots, or while another report is asking, only this thread is
   reported (in `single`). */
IL_CRASH_INTERNAL void il_crash_begin_capture(il_capture *capture, il_thread_slot *single, il_reader *reader,
                                              const void *context);
/* Lets the answered threads go once the report is written. */
IL_CRASH_INTERNAL void il_crash_end_capture(il_capture *capture);
/* At install: the slots the other threads answer into, and the signal that asks them. Returns 0 or
   an errno value. Not async-signal-safe. */
IL_CRASH_INTERNAL int il_crash_prepare_capture(void);

/* ---- the report (crash_report.c) ---- */

/* At install: the process's path, name and OS version, which the report prints and cannot look up
   at crash time. Not async-signal-safe. */
IL_CRASH_INTERNAL void il_crash_capture_process_identity(void);

/* The program's name (the last part of /proc/self/exe at install), for the report and file names. */
IL_CRASH_INTERNAL const char *il_crash_process_name(void);

/* ---- the helper (crash_helper.c) ---- */

/* 1 when il_crash_set_helper laid out a helper to start. */
IL_CRASH_INTERNAL int il_crash_helper_ready(void);
/* The plan's timeout, 0 without one. */
IL_CRASH_INTERNAL uint64_t il_crash_helper_timeout_ms(void);
/* Records the crash, starts the helper and waits for it (bounded): 1 when it wrote the report, else 0
   (having said why on standard error). Async-signal-safe. */
IL_CRASH_INTERNAL int il_crash_helper_capture(int signal, const siginfo_t *info, const void *context);
/* The in-process report's file in the crash directory, under a temporary name (after a capture that
   failed); -1 when it cannot be made. */
IL_CRASH_INTERNAL int il_crash_helper_open_fallback(void);
/* Closes it and gives it its name. */
IL_CRASH_INTERNAL void il_crash_helper_close_fallback(int fd);

/* ---- the handler (crash_handler.c) ---- */

#define IL_CRASH_SIGNAL_COUNT 6
/* The signals the handler reports; a thread answering the capture signal leaves them unblocked. */
IL_CRASH_INTERNAL extern const int il_crash_signals[IL_CRASH_SIGNAL_COUNT];
#endif
