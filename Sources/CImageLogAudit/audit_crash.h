#ifndef CIMAGELOG_AUDIT_CRASH_H
#define CIMAGELOG_AUDIT_CRASH_H
/* `imagelog run --crash-dir`: the crash handler the audit module gives the program, as glibc's
   catchsegv did with its preloaded library. Included by audit.c only.

   imagelog passes IMAGELOG_AUDIT_CRASH_DIR (absolute), IMAGELOG_AUDIT_CRASH_HELPER (itself, absolute),
   IMAGELOG_AUDIT_CRASH_TIMEOUT_MS, IMAGELOG_AUDIT_CRASH_WAIT (--crash-wait: the helper then says it
   is done only once the report is final) and IMAGELOG_AUDIT_CRASH_DOCUMENT (--crash-document). In la_version, before any of the program's code runs, the module
   lays out the helper's command line (CImageLogCrashHelper.h, the code the library's handler uses),
   gives the main thread an alternate signal stack (so that a stack overflow on it is caught), and
   installs its handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT and SIGTRAP with rt_sigaction
   directly: the module has no libc, so it brings the signal return trampoline libc would (SA_RESTORER,
   x86_64; aarch64's kernel returns through the vDSO's). A program that installs its own handler later
   replaces ours, as it would replace any: it keeps its own behaviour.

   At a crash the first crashing thread of the process (il_helper_claim: a claim another process made,
   a vfork child in shared memory or the parent a child was forked from, is not ours) records the
   crash, starts the helper (imagelog capture-crash) and waits for it; when the helper writes no
   report, it says why on standard error and writes a short report itself (audit_crash_report.h), into
   a file opened at install, so that a program with no descriptor left still gets it. Then it puts back
   the actions it found and re-raises,
   so the program dies of its own signal (exit status and core dumps as without imagelog). Threads
   created by the program have no alternate stack of ours (the module cannot see pthread_create
   without auditing every symbol binding): a stack overflow on one of them kills the program as it
   would without imagelog, with no report. */
#include "CImageLogCrashHelper.h"
#include "../CImageLog/crash_unloaded.h"

enum { AUDIT_CRASH_SIGNALS = 6, AUDIT_ALTERNATE_STACK = 256 * 1024, AUDIT_HELPER_ENVIRONMENT = 1024 };

static const int audit_crash_signals[AUDIT_CRASH_SIGNALS] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
static il_kernel_sigaction audit_previous[AUDIT_CRASH_SIGNALS];
static il_helper_plan audit_plan;
static il_helper_record audit_record;
/* The images the program removed (la_objclose), kept for a crash (crash_unloaded.h): always kept,
   --crash-dir or not (the static memory is touched only when an image goes). */
static il_unloaded_history audit_unloaded;
static char *audit_helper_environment[AUDIT_HELPER_ENVIRONMENT];
static uint64_t audit_reporting;    /* who handles a crash: il_helper_claim's word (atomic builtins) */
static int audit_handled_pid;       /* the process whose handling thread has put the previous actions back */
static char audit_alternate_stack[AUDIT_ALTERNATE_STACK] __attribute__((aligned(16)));

/* What the in-process report needs, opened at install (il_helper_keep): the report's file, unnamed in
   the crash directory until the crash links it under its name, and /proc/self/task. */
static il_kept_file audit_kept_report = {-1, 0, 0, 0}, audit_kept_tasks = {-1, 0, 0, 0};

static void audit_write_crash_report(int signal, siginfo_t *info, void *context);

#if defined(__x86_64__)
/* What glibc's __restore_rt is: rt_sigreturn. The same bytes, so unwinders recognise the frame. */
__attribute__((visibility("hidden"))) void audit_restore_rt(void);
__asm__(".text\n.align 16\naudit_restore_rt:\n  mov $15, %rax\n  syscall\n  hlt\n");
#define AUDIT_SA_RESTORER 0x04000000
#endif

static void audit_restore_actions(void) {
  for (int i = 0; i < AUDIT_CRASH_SIGNALS; i++) SYS(SYS_rt_sigaction, audit_crash_signals[i], &audit_previous[i], NULL, 8);
}

static void audit_crash_handler(int signal, siginfo_t *info, void *context) {
  int pid = (int)SYS(SYS_getpid, 0), self = (int)SYS(SYS_gettid, 0);
  int claim = il_helper_claim(&audit_reporting, pid, self);
  if (claim == IL_CLAIM_TAKEN) {
    il_helper_fill_record(&audit_record, pid, self, signal, info, context, &audit_unloaded);
    il_helper_result result;
    il_helper_run(&audit_plan, &result);
    if (result.outcome != IL_HELPER_CAPTURED) {
      char text[IL_HELPER_PATH_MAX + 200];
      size_t length = il_helper_describe_failure(&audit_plan, &result, text, sizeof text);
      SYS(SYS_write, 2, text, length);
      audit_write_crash_report(signal, info, context);
    }
    audit_restore_actions();
    __atomic_store_n(&audit_handled_pid, pid, __ATOMIC_SEQ_CST);
  } else if (claim == IL_CLAIM_OTHER_THREAD) {
    /* Another thread handles its crash: wait for it (as long as its helper may take, and 2 s more),
       then take the actions it put back. */
    uint64_t deadline = il_helper_now_ns() + audit_plan.timeout_ns + 2000000000u;
    while (__atomic_load_n(&audit_handled_pid, __ATOMIC_SEQ_CST) != pid && il_helper_now_ns() < deadline)
      il_helper_pause_ns(10000000u);
    audit_restore_actions();
  } else {
    audit_restore_actions();  /* the handler itself crashed: out of the way */
  }
  /* A fault the kernel raised recurs when the instruction is retried; anything else is sent again. */
  int code = info != NULL ? info->si_code : 0;
  int is_fault = signal == SIGSEGV || signal == SIGBUS || signal == SIGILL || signal == SIGFPE;
  if (!(is_fault && code > 0 && code != 0x80)) {
    long pid = SYS(SYS_getpid, 0), tid = SYS(SYS_gettid, 0);
    if (SYS(SYS_rt_tgsigqueueinfo, pid, tid, signal, info) != 0) SYS(SYS_tgkill, pid, tid, signal);
  }
}

/* In la_version: lays out the helper and installs the handler when imagelog asked for it. */
static void audit_install_crash_handler(void) {
  const char *directory = variable("IMAGELOG_AUDIT_CRASH_DIR"), *helper = variable("IMAGELOG_AUDIT_CRASH_HELPER");
  uint64_t timeout_ms = IL_HELPER_DEFAULT_TIMEOUT_MS;
  if (directory == NULL || helper == NULL) return;
  if (!parse_number(variable("IMAGELOG_AUDIT_CRASH_TIMEOUT_MS"), &timeout_ms)) timeout_ms = IL_HELPER_DEFAULT_TIMEOUT_MS;
  /* The strings are the process's initial environment, which stays where it is. */
  int used = 0;
  for (char **entry = environment; entry != NULL && *entry != NULL && used < AUDIT_HELPER_ENVIRONMENT - 2; entry++)
    if (il_helper_passes_variable(*entry)) audit_helper_environment[used++] = *entry;
  audit_helper_environment[used++] = (char *)il_helper_swift_backtrace;
  audit_helper_environment[used] = NULL;
  /* imagelog run --crash-wait: the helper says it is done once the report is final; --upload-url: it
     starts the upload once the files are written; --crash-document: it writes the JSON document too. */
  static char final_option[] = "--done-when-final", upload_option[] = "--upload-url", document_option[] = "--document";
  static char *extra[5];
  int extras = 0;
  if (variable("IMAGELOG_AUDIT_CRASH_WAIT") != NULL) extra[extras++] = final_option;
  if (variable("IMAGELOG_AUDIT_CRASH_DOCUMENT") != NULL) extra[extras++] = document_option;
  const char *upload_url = variable("IMAGELOG_AUDIT_CRASH_UPLOAD_URL");
  if (upload_url != NULL) { extra[extras++] = upload_option; extra[extras++] = (char *)upload_url; }
  extra[extras] = NULL;
  if (!il_helper_prepare(&audit_plan, helper, directory, &audit_record, timeout_ms, audit_helper_environment, extra))
    return;
  il_helper_keep(&audit_kept_report, il_helper_open_unnamed(audit_plan.directory));
  il_helper_keep(&audit_kept_tasks, SYS(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  stack_t stack = {.ss_sp = audit_alternate_stack, .ss_flags = 0, .ss_size = sizeof audit_alternate_stack};
  uintptr_t minimum = auxiliary_value(AT_MINSIGSTKSZ);
  if (minimum == 0 || minimum <= sizeof audit_alternate_stack) SYS(SYS_sigaltstack, &stack, NULL);
  il_kernel_sigaction action = {0, 0, 0, 0};
  action.handler = (void *)audit_crash_handler;
  action.flags = SA_SIGINFO | SA_ONSTACK;
#if defined(__x86_64__)
  action.flags |= AUDIT_SA_RESTORER;
  action.restorer = (void *)audit_restore_rt;
#endif
  for (int i = 0; i < AUDIT_CRASH_SIGNALS; i++) action.mask |= (uint64_t)1 << (audit_crash_signals[i] - 1);
  action.mask |= (uint64_t)1 << (SIGPIPE - 1);
  for (int i = 0; i < AUDIT_CRASH_SIGNALS; i++) SYS(SYS_rt_sigaction, audit_crash_signals[i], &action, &audit_previous[i], 8);
}
#endif
