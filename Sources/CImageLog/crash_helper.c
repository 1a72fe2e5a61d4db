/* Out-of-process capture for the library's crash handler: the record the helper reads and the plan
   that starts it (CImageLogCrashHelper.h, shared with the audit module of `imagelog run
   --crash-dir`), laid out at install; at the crash the handler asks il_crash_helper_capture first, and
   writes the in-process report only when the helper did not write one (missing, refused, crashed,
   killed at the timeout). Without a report descriptor of its own, that report goes into the crash
   directory under the name the helper would have used, written to a file with no name yet (O_TMPFILE,
   opened by il_crash_set_helper, so that a program with no descriptor left at its crash still gets its
   report; a hidden temporary name where that cannot be) and linked when complete, so a reader never
   sees half of it. */
#define _GNU_SOURCE
#include "crash_internal.h"
#include "CImageLogCrashHelper.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static il_helper_record record;
static il_helper_plan plan;
static char **helper_environment;      /* a copy of the environment at install: strings and array */
static char fallback_temporary[IL_HELPER_PATH_MAX + 160], fallback_final[IL_HELPER_PATH_MAX + 160];
/* The in-process report's file, unnamed in the crash directory from install (il_helper_keep), and
   whether the report being written is in it. */
static il_kept_file kept_report = {-1, 0, 0, 0};
static int fallback_unnamed;

/* The environment as it is now, copied into one allocation: the program may setenv and unsetenv
   later, and the crash must not read an array being rebuilt. Less what il_helper_passes_variable
   keeps from the helper, and with its own SWIFT_BACKTRACE. */
static char **copy_environment(void) {
  size_t count = 1, bytes = sizeof il_helper_swift_backtrace;
  for (char **entry = environ; entry != NULL && *entry != NULL; entry++) {
    if (!il_helper_passes_variable(*entry)) continue;
    count++;
    bytes += strlen(*entry) + 1;
  }
  char **copy = malloc((count + 1) * sizeof *copy + bytes);
  if (copy == NULL) return NULL;
  char *text = (char *)(copy + count + 1);
  size_t used = 0;
  for (char **entry = environ; entry != NULL && *entry != NULL; entry++) {
    if (!il_helper_passes_variable(*entry)) continue;
    size_t length = strlen(*entry) + 1;
    memcpy(text, *entry, length);
    copy[used++] = text;
    text += length;
  }
  memcpy(text, il_helper_swift_backtrace, sizeof il_helper_swift_backtrace);
  copy[used++] = text;
  copy[used] = NULL;
  return copy;
}

int il_crash_set_helper(const char *helper, const char *directory, uint64_t timeout_ms) {
  if (helper == NULL) {
    plan.ready = 0;
    return 0;
  }
  char **environment = copy_environment();
  if (environment == NULL) return ENOMEM;
  char **previous = helper_environment;
  if (!il_helper_prepare(&plan, helper, directory, &record, timeout_ms, environment, NULL)) {
    free(environment);
    return EINVAL;
  }
  helper_environment = environment;
  free(previous);  /* a crash reads the plan's array only while the handler runs, never during install */
  il_helper_keep(&kept_report, il_helper_open_unnamed(plan.directory));
  return 0;
}

int il_crash_helper_ready(void) { return plan.ready; }

uint64_t il_crash_helper_timeout_ms(void) { return plan.ready ? plan.timeout_ns / 1000000u : 0; }

int il_crash_helper_capture(int signal, const siginfo_t *info, const void *context) {
  if (!plan.ready) return 0;
  il_helper_fill_record(&record, (int32_t)IL_SYS(SYS_getpid, 0), (int32_t)IL_SYS(SYS_gettid, 0), signal, info,
                        context, il_crash_unloaded_history());
  il_helper_result result;
  il_helper_run(&plan, &result);
  if (result.outcome == IL_HELPER_CAPTURED) return 1;
  char text[IL_HELPER_PATH_MAX + 200];
  size_t length = il_helper_describe_failure(&plan, &result, text, sizeof text);
  IL_SYS(SYS_write, 2, text, length);
  return 0;
}

/* "DIRECTORY/" then `prefix`, the stem, `suffix` into `path`. */
static void crash_file_path(char *path, const char *prefix, const char *suffix) {
  size_t used = 0, length = strlen(plan.directory);
  memcpy(path, plan.directory, length);
  used = length;
  if (used == 0 || path[used - 1] != '/') path[used++] = '/';
  length = strlen(prefix);
  memcpy(path + used, prefix, length);
  used += length;
  used += il_helper_file_stem(path + used, il_crash_process_name(), record.pid, record.time);
  length = strlen(suffix);
  memcpy(path + used, suffix, length + 1);
}

int il_crash_helper_open_fallback(void) {
  if (!plan.ready) return -1;
  crash_file_path(fallback_temporary, ".", ".crash.partial");
  crash_file_path(fallback_final, "", ".crash");
  int unnamed = il_helper_kept(&kept_report);
  fallback_unnamed = unnamed >= 0;
  if (fallback_unnamed) return unnamed;
  long fd = IL_SYS(SYS_openat, AT_FDCWD, fallback_temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
  if (fd < 0) il_helper_say_unwritten(plan.directory, -fd);
  return fd < 0 ? -1 : (int)fd;
}

void il_crash_helper_close_fallback(int fd) {
  if (fallback_unnamed) {
    /* Never in place of a report the helper wrote under the same name. */
    long linked = il_helper_link_unnamed(fd, fallback_final);
    if (linked == -EEXIST) {
      crash_file_path(fallback_final, "", "-in-process.crash");
      linked = il_helper_link_unnamed(fd, fallback_final);
    }
    if (linked != 0) il_helper_say_unwritten(plan.directory, -linked);
    return;
  }
  IL_SYS(SYS_close, fd);
  /* link then unlink: the report never replaces one the helper wrote under the same name. */
  if (IL_SYS(SYS_linkat, AT_FDCWD, fallback_temporary, AT_FDCWD, fallback_final, 0) != 0) {
    crash_file_path(fallback_final, "", "-in-process.crash");
    IL_SYS(SYS_renameat, AT_FDCWD, fallback_temporary, AT_FDCWD, fallback_final);
    return;
  }
  IL_SYS(SYS_unlinkat, AT_FDCWD, fallback_temporary, 0);
}
