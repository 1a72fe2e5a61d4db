// `imagelog run`, whole: the arguments, the audit module, the command, the output descriptor, the
// environment and the exec. It runs from the executable's first constructor (argv.c), before the
// Swift runtime's initializers and main: `run` ends in the command's own process image, so nothing
// imagelog starts before the exec is of any use to it, and every microsecond of it is charged to
// every run (BENCHMARKS.md). The Swift side (RunCommand.swift) keeps only the help text, and calls
// il_run too should it ever be reached.
//
// The arguments are read as ArgumentScanner reads them (the same steps in the same order, so the
// same usage errors), and diagnostics are escaped as printError escapes them (TextEscaping's scheme,
// the audit module's il_line_escaped).
#define _GNU_SOURCE
#include "CImageLogMain.h"
#include "CImageLogImage.h"
#include "CImageLogCrashHelper.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *const il_run_usage =
  "imagelog run [--timing] [--output <file>] [--format <style>] [--full-build-ids] [--no-follow] "
  "[--crash-dir <directory>] [--crash-timeout <seconds>] [--crash-wait] [--crash-document] [--upload-url <url>] "
  "[--unloaded-history <count>] -- <command> [<argument> ...]";

/* The crash directory il_run found missing, for the Swift side to make (il_run_crash_directory_to_make). */
static char *missing_crash_directory;

const char *il_run_crash_directory_to_make(void) { return missing_crash_directory; }

/* The module's file name, as SwiftPM builds the `ImageLogAudit` product and `make install` copies it. */
static const char module_file_name[] = "libImageLogAudit.so";

enum { IL_EXIT_FAILURE = 1, IL_EXIT_USAGE = 64 };

/* ---- output: one write(2) loop, the diagnostics ---- */

static void write_all(int descriptor, const char *text, size_t length) {
  while (length > 0) {
    ssize_t written = write(descriptor, text, length);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text += written;
    length -= (size_t)written;
  }
}

/* printError: the pieces joined, escaped as one line, then a newline, to standard error. */
static void print_error(const char *const *pieces, size_t count) {
  size_t length = 0;
  for (size_t index = 0; index < count; index++) length += strlen(pieces[index]);
  char *raw = malloc(length + 1);
  /* At most 4 bytes out per byte in (\xHH), and the newline. */
  size_t capacity = 4 * length + 1;
  char *escaped = malloc(capacity);
  if (raw == NULL || escaped == NULL) {
    for (size_t index = 0; index < count; index++) write_all(2, pieces[index], strlen(pieces[index]));
    write_all(2, "\n", 1);
    free(raw); free(escaped);
    return;
  }
  size_t used = 0;
  for (size_t index = 0; index < count; index++) {
    size_t piece = strlen(pieces[index]);
    memcpy(raw + used, pieces[index], piece);
    used += piece;
  }
  il_line line = { escaped, capacity - 1, 0, 0 };
  il_line_escaped(&line, raw, used);
  escaped[line.used++] = '\n';
  write_all(2, escaped, line.used);
  free(raw);
  free(escaped);
}
#define PRINT_ERROR(...) do { const char *const pieces_[] = { __VA_ARGS__ }; \
                              print_error(pieces_, sizeof pieces_ / sizeof pieces_[0]); } while (0)

/* ImageLogMain's usage error: the message, the usage, where help is; written as it is (printErrorLines). */
static int usage_error(const char *message, const char *quoted) {
  const char *pieces[] = { "Error: ", message, quoted ? quoted : "", quoted ? "'" : "", "\nUsage: ", il_run_usage,
                           "\n  See 'imagelog run --help' for more information.\n" };
  for (size_t index = 0; index < sizeof pieces / sizeof pieces[0]; index++) write_all(2, pieces[index], strlen(pieces[index]));
  return IL_EXIT_USAGE;
}

/* ---- the arguments, as ArgumentScanner takes them ---- */

/* The options part (before the first `--`), as a list items are taken out of. */
typedef struct {
  char **items;
  int count;
} option_list;

static int is_option(const char *argument) { return argument[0] == '-'; }

/* ArgumentScanner.flag: removes every occurrence; true when there was one. */
static int take_flag(option_list *list, const char *name) {
  int kept = 0, found = 0;
  for (int index = 0; index < list->count; index++) {
    char *argument = list->items[index];
    if (is_option(argument) && strcmp(argument, name) == 0) { found = 1; continue; }
    list->items[kept++] = argument;
  }
  list->count = kept;
  return found;
}

/* ArgumentScanner.option: every `NAME VALUE` and `NAME=VALUE` for either name taken out, in one pass;
   the last value, or NULL. Returns 0, or the usage status when a name has no value after it. */
static int take_option(option_list *list, const char *name, const char *other_name, char **value) {
  int kept = 0, index = 0;
  *value = NULL;
  while (index < list->count) {
    char *argument = list->items[index];
    if (!is_option(argument)) { list->items[kept++] = argument; index++; continue; }
    if (strcmp(argument, name) == 0 || (other_name != NULL && strcmp(argument, other_name) == 0)) {
      if (index + 1 >= list->count) {
        const char *pieces[] = { "Missing value for '", argument, " <value>'" };
        size_t length = strlen(pieces[0]) + strlen(pieces[1]) + strlen(pieces[2]) + 1;
        char *message = malloc(length);
        if (message == NULL) return usage_error("Missing value", NULL);
        snprintf(message, length, "%s%s%s", pieces[0], pieces[1], pieces[2]);
        return usage_error(message, NULL);
      }
      *value = list->items[index + 1];
      index += 2;
      continue;
    }
    const char *equals = strchr(argument, '=');
    if (equals != NULL) {
      size_t prefix = (size_t)(equals - argument);
      if ((strlen(name) == prefix && strncmp(argument, name, prefix) == 0)
          || (other_name != NULL && strlen(other_name) == prefix && strncmp(argument, other_name, prefix) == 0)) {
        *value = (char *)equals + 1;
        index++;
        continue;
      }
    }
    list->items[kept++] = argument;
    index++;
  }
  list->count = kept;
  return 0;
}

int il_run_wants_help(int argc, char **argv) {
  for (int index = 2; index < argc && strcmp(argv[index], "--") != 0; index++) {
    if (strcmp(argv[index], "--help") == 0 || strcmp(argv[index], "-h") == 0) return 1;
  }
  return 0;
}

/* ---- what to run, and with which module ---- */

/* The module next to the running executable (`.build/debug/`), else in `PREFIX/lib/imagelog/` for
   an executable in `PREFIX/bin/`. Returns a path (malloc'd) or NULL, having said where it looked. */
static char *find_module(void) {
  char real[4097];
  ssize_t count = readlink("/proc/self/exe", real, 4096);
  real[count > 0 ? count : 0] = '\0';
  char *candidates[2] = { NULL, NULL };
  int found = 0;
  char *slash = strrchr(real, '/');
  if (slash != NULL) {
    *slash = '\0';
    if (asprintf(&candidates[found], "%s/%s", real, module_file_name) >= 0) found++;
    char *parent = strrchr(real, '/');
    if (parent != NULL) {
      *parent = '\0';
      if (asprintf(&candidates[found], "%s/lib/imagelog/%s", real, module_file_name) >= 0) found++;
    }
  }
  for (int index = 0; index < found; index++) {
    if (access(candidates[index], R_OK) == 0) {
      if (index == 0) free(candidates[1]);
      return candidates[index];
    }
  }
  PRINT_ERROR("imagelog: cannot find the audit module ", module_file_name, " (looked at ",
              found > 0 ? candidates[0] : "", found > 1 ? ", " : "", found > 1 ? candidates[1] : "",
              "); build it with 'swift build --product ImageLogAudit' or install with 'make install'");
  return NULL;
}

enum resolution { RESOLVED_FOUND, RESOLVED_NOT_FOUND, RESOLVED_NOT_EXECUTABLE };

static enum resolution check_candidate(const char *candidate) {
  struct stat info;
  if (stat(candidate, &info) != 0) return RESOLVED_NOT_FOUND;
  if (!S_ISREG(info.st_mode) || access(candidate, X_OK) != 0) return RESOLVED_NOT_EXECUTABLE;
  return RESOLVED_FOUND;
}

/* The file `command` runs, as execvp(3) looks for it: itself when it contains a `/`, else the first
   executable regular file on PATH. A regular file that is there but not executable is reported as
   such (in *path), not as missing. */
static enum resolution resolve(const char *command, char **path) {
  if (strchr(command, '/') != NULL) {
    *path = strdup(command);
    return check_candidate(command);
  }
  const char *search = getenv("PATH");
  if (search == NULL) search = "/usr/bin:/bin";
  enum resolution denied = RESOLVED_NOT_FOUND;
  *path = NULL;
  const char *start = search;
  for (;;) {
    const char *end = strchr(start, ':');
    size_t length = end != NULL ? (size_t)(end - start) : strlen(start);
    char *candidate = NULL;
    if (asprintf(&candidate, "%.*s/%s", (int)(length == 0 ? 1 : length), length == 0 ? "." : start, command) < 0) break;
    enum resolution result = check_candidate(candidate);
    struct stat info;
    if (result == RESOLVED_FOUND) { free(*path); *path = candidate; return RESOLVED_FOUND; }
    if (result == RESOLVED_NOT_EXECUTABLE && denied == RESOLVED_NOT_FOUND && stat(candidate, &info) == 0 && S_ISREG(info.st_mode)) {
      denied = RESOLVED_NOT_EXECUTABLE;
      *path = candidate;
    } else {
      free(candidate);
    }
    if (end == NULL) break;
    start = end + 1;
  }
  return denied;
}

/* True when running `path` changes the user or group ID (set-user-ID or set-group-ID to someone
   else): the kernel sets AT_SECURE, and the loader then ignores LD_AUDIT. */
static int is_secure_execution(const char *path) {
  struct stat info;
  if (stat(path, &info) != 0) return 0;
  return ((info.st_mode & S_ISUID) && info.st_uid != getuid()) || ((info.st_mode & S_ISGID) && info.st_gid != getgid());
}

/* A copy of `descriptor` near the top of the descriptor limit (below 1024, where select(2) still
   works), not close-on-exec; `descriptor` itself is closed unless it is standard error. */
static int high_descriptor(int descriptor) {
  struct rlimit limit;
  int ceiling = 256;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) ceiling = limit.rlim_cur < 1024 ? (int)limit.rlim_cur : 1024;
  int floors[3] = { ceiling - 1, ceiling / 2, 10 };
  int copy = -1;
  for (int index = 0; index < 3; index++) {
    if (floors[index] <= 2) continue;
    copy = fcntl(descriptor, F_DUPFD, floors[index]);
    if (copy >= 0) break;
  }
  int saved = errno;
  if (descriptor != 2) close(descriptor);
  errno = saved;
  return copy;
}

/* ---- the run ---- */

int il_run(int argc, char **argv, char **envp) {
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);

  /* argv[1] is "run"; the options are what comes before the first "--", the rest is positional. */
  int terminator = argc;
  for (int index = 2; index < argc; index++) if (strcmp(argv[index], "--") == 0) { terminator = index; break; }
  option_list options = { malloc(sizeof(char *) * (size_t)(argc + 1)), 0 };
  if (options.items == NULL) return IL_EXIT_FAILURE;
  for (int index = 2; index < terminator; index++) options.items[options.count++] = argv[index];

  int timing = take_flag(&options, "--timing");
  int follow = !take_flag(&options, "--no-follow");
  char *output_path = NULL, *style = NULL;
  int status = take_option(&options, "--output", "-o", &output_path);
  if (status != 0) return status;
  status = take_option(&options, "--format", NULL, &style);
  if (status != 0) return status;
  if (style == NULL) style = "logger";
  if (strcmp(style, "logger") != 0 && strcmp(style, "crash") != 0 && strcmp(style, "unstrip") != 0 && strcmp(style, "json") != 0) {
    char *message = NULL;
    if (asprintf(&message, "Unknown format '%s' (expected one of: logger, crash, unstrip, json)", style) < 0) message = "Unknown format";
    return usage_error(message, NULL);
  }
  int full_build_ids = take_flag(&options, "--full-build-ids");
  char *crash_directory = NULL, *crash_timeout = NULL;
  status = take_option(&options, "--crash-dir", NULL, &crash_directory);
  if (status != 0) return status;
  status = take_option(&options, "--crash-timeout", NULL, &crash_timeout);
  if (status != 0) return status;
  int crash_wait = take_flag(&options, "--crash-wait");
  int crash_document = take_flag(&options, "--crash-document");
  if (crash_document && crash_directory == NULL) return usage_error("--crash-document needs --crash-dir", NULL);
  char *upload_url = NULL;
  status = take_option(&options, "--upload-url", NULL, &upload_url);
  if (status != 0) return status;
  if (upload_url != NULL && crash_directory == NULL) return usage_error("--upload-url needs --crash-dir", NULL);
  char *unloaded_history = NULL;
  status = take_option(&options, "--unloaded-history", NULL, &unloaded_history);
  if (status != 0) return status;
  if (unloaded_history != NULL) {
    char *end = NULL;
    errno = 0;
    long count = strtol(unloaded_history, &end, 10);
    if (end == unloaded_history || *end != '\0' || errno != 0 || count < 0 || count > 64) {
      char *message = NULL;
      if (asprintf(&message, "'%s' is not a count of images (0 to 64) for --unloaded-history", unloaded_history) < 0)
        message = "Bad --unloaded-history";
      return usage_error(message, NULL);
    }
  }
  uint64_t timeout_ms = IL_HELPER_DEFAULT_TIMEOUT_MS;
  if (crash_timeout != NULL) {
    char *end = NULL;
    double seconds = strtod(crash_timeout, &end);
    if (end == crash_timeout || *end != '\0' || !(seconds > 0) || seconds > 86400) {
      char *message = NULL;
      if (asprintf(&message, "'%s' is not a number of seconds (more than 0, at most 86400) for --crash-timeout",
                   crash_timeout) < 0) message = "Bad --crash-timeout";
      return usage_error(message, NULL);
    }
    timeout_ms = (uint64_t)(seconds * 1000 + 0.5);
    if (timeout_ms == 0) timeout_ms = 1;
  }
  for (int index = 0; index < options.count; index++) {
    if (is_option(options.items[index]) && strcmp(options.items[index], "-") != 0) {
      return usage_error("Unknown option '", options.items[index]);
    }
  }
  /* The command and its arguments: the positionals before `--`, then everything after it. */
  char **arguments = options.items;
  int count = options.count;
  for (int index = terminator + 1; index < argc; index++) arguments[count++] = argv[index];
  arguments[count] = NULL;
  if (count == 0) return usage_error("Missing expected argument '<command>'", NULL);
  const char *command = arguments[0];

  char *module = find_module();
  if (module == NULL) return IL_EXIT_FAILURE;
  char *executable = NULL;
  switch (resolve(command, &executable)) {
  case RESOLVED_FOUND: break;
  case RESOLVED_NOT_FOUND:
    PRINT_ERROR("imagelog: ", command, ": command not found");
    return IL_EXIT_FAILURE;
  case RESOLVED_NOT_EXECUTABLE:
    PRINT_ERROR("imagelog: ", command, ": cannot run ", executable, ": ", strerror(EACCES));
    return IL_EXIT_FAILURE;
  }
  if (is_secure_execution(executable)) {
    PRINT_ERROR("imagelog: ", command, ": set-user-ID or set-group-ID program: the dynamic loader ignores LD_AUDIT, "
                "so no images can be reported");
  }

  /* The module's descriptor: the file, or a copy of standard error, at a high number the program
     will not get from open(2) by accident, and open across exec (only this one). */
  int opened = 2;
  if (output_path != NULL) {
    /* The user's own chosen file, written as the program runs, so not made whole elsewhere first: made
       or emptied as a shell's `>` does, but never through a symbolic link (one planted in a folder others
       write would empty or fill its target). A link is followed only to a stream already open, such as
       `-o /dev/stderr` (a terminal, pipe or socket), which is written, never emptied. */
    opened = open(output_path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    int linked = opened < 0 && errno == ELOOP;
    /* O_NONBLOCK: a link to a FIFO nobody reads fails at once instead of waiting (cleared below). */
    if (linked) opened = open(output_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (opened < 0) {
      PRINT_ERROR("imagelog: ", output_path, ": cannot open: ", strerror(errno));
      return IL_EXIT_FAILURE;
    }
    struct stat output;
    if (fstat(opened, &output) != 0 || (linked && (S_ISREG(output.st_mode) || S_ISBLK(output.st_mode)))) {
      close(opened);
      PRINT_ERROR("imagelog: ", output_path, ": is a symbolic link to a file: not written through (give the file's own path)");
      return IL_EXIT_FAILURE;
    }
    if (linked) fcntl(opened, F_SETFL, fcntl(opened, F_GETFL) & ~O_NONBLOCK);
    if (S_ISREG(output.st_mode) && ftruncate(opened, 0) != 0) {
      int error = errno;
      close(opened);
      PRINT_ERROR("imagelog: ", output_path, ": cannot empty: ", strerror(error));
      return IL_EXIT_FAILURE;
    }
  }
  /* --crash-dir: a folder we may write in, made absolute now (the program may change directory), and
     imagelog itself as the helper the module starts at a crash. A missing folder is made as
     core-handler makes its own, by the Swift side (CrashFolder): the caller makes it and calls again. */
  char *crash_path = NULL, *helper_path = NULL;
  if (crash_directory != NULL) {
    struct stat folder;
    crash_path = realpath(crash_directory, NULL);
    if (crash_path == NULL && errno == ENOENT && missing_crash_directory == NULL) {
      if (opened != 2) close(opened);
      missing_crash_directory = crash_directory;
      return IL_RUN_MAKE_CRASH_DIRECTORY;
    }
    if (crash_path == NULL || stat(crash_path, &folder) != 0 || !S_ISDIR(folder.st_mode) || access(crash_path, W_OK | X_OK) != 0) {
      int code = crash_path == NULL ? errno : (stat(crash_path, &folder) == 0 && !S_ISDIR(folder.st_mode) ? ENOTDIR : errno);
      PRINT_ERROR("imagelog: ", crash_directory, ": cannot write crash reports there: ", strerror(code));
      if (opened != 2) close(opened);
      return IL_EXIT_FAILURE;
    }
    helper_path = realpath("/proc/self/exe", NULL);
    if (helper_path == NULL) {
      PRINT_ERROR("imagelog: cannot find imagelog itself (/proc/self/exe): ", strerror(errno));
      if (opened != 2) close(opened);
      return IL_EXIT_FAILURE;
    }
  }
  int output = high_descriptor(opened);
  struct stat info;
  if (output < 0 || fstat(output, &info) != 0) {
    PRINT_ERROR("imagelog: cannot keep a descriptor for the events: ", strerror(errno));
    return IL_EXIT_FAILURE;
  }

  /* The environment: ours without IMAGELOG_AUDIT_* and LD_AUDIT, then LD_AUDIT with the module first
     (before any modules already named), then what the module reads. */
  size_t variables = 0;
  for (char **entry = envp; entry != NULL && *entry != NULL; entry++) variables++;
  /* Room for the 11 added here, the 6 flags' variables and the NULL: 18 (16 was short by one with
     every option given). */
  char **environment = malloc(sizeof(char *) * (variables + 18));
  if (environment == NULL) return IL_EXIT_FAILURE;
  size_t used = 0;
  const char *existing_audit = "";
  for (char **entry = envp; entry != NULL && *entry != NULL; entry++) {
    if (strncmp(*entry, "IMAGELOG_AUDIT_", 15) == 0) continue;
    if (strncmp(*entry, "LD_AUDIT=", 9) == 0) { existing_audit = *entry + 9; continue; }
    environment[used++] = *entry;
  }
  char *added[12];
  int made = 0;
  made += asprintf(&added[0], "LD_AUDIT=%s%s%s", module, existing_audit[0] ? ":" : "", existing_audit) >= 0;
  made += asprintf(&added[1], "IMAGELOG_AUDIT_FD=%d", output) >= 0;
  made += asprintf(&added[2], "IMAGELOG_AUDIT_FILE=%llu:%llu", (unsigned long long)info.st_dev, (unsigned long long)info.st_ino) >= 0;
  made += asprintf(&added[3], "IMAGELOG_AUDIT_FORMAT=%s", style) >= 0;
  made += asprintf(&added[4], "IMAGELOG_AUDIT_PID=%d", (int)getpid()) >= 0;
  made += asprintf(&added[5], "IMAGELOG_AUDIT_MODULE=%s", module) >= 0;
  /* A monotonic clock is non-negative. */
  made += asprintf(&added[6], "IMAGELOG_AUDIT_START_NS=%llu",
                   (unsigned long long)start.tv_sec * 1000000000ull + (unsigned long long)start.tv_nsec) >= 0;
  if (crash_path != NULL) {
    made += asprintf(&added[7], "IMAGELOG_AUDIT_CRASH_DIR=%s", crash_path) >= 0;
    made += asprintf(&added[8], "IMAGELOG_AUDIT_CRASH_HELPER=%s", helper_path) >= 0;
    made += asprintf(&added[9], "IMAGELOG_AUDIT_CRASH_TIMEOUT_MS=%llu", (unsigned long long)timeout_ms) >= 0;
    if (crash_wait) environment[used++] = "IMAGELOG_AUDIT_CRASH_WAIT=1";
    if (crash_document) environment[used++] = "IMAGELOG_AUDIT_CRASH_DOCUMENT=1";
    /* --upload-url: the helper sends the crash once written (imagelog upload, in a process of its own). */
    if (upload_url != NULL) made += asprintf(&added[10], "IMAGELOG_AUDIT_CRASH_UPLOAD_URL=%s", upload_url) >= 0;
  }
  if (made != (crash_path != NULL ? 10 + (upload_url != NULL) : 7)) return IL_EXIT_FAILURE;
  for (int index = 0; index < made; index++) environment[used++] = added[index];
  if (timing) environment[used++] = "IMAGELOG_AUDIT_TIMING=1";
  if (full_build_ids) environment[used++] = "IMAGELOG_AUDIT_FULL_BUILD_IDS=1";
  if (!follow) environment[used++] = "IMAGELOG_AUDIT_NO_FOLLOW=1";
  char *history_variable = NULL;
  if (unloaded_history != NULL) {
    if (asprintf(&history_variable, "IMAGELOG_AUDIT_UNLOADED_HISTORY=%s", unloaded_history) < 0) return IL_EXIT_FAILURE;
    environment[used++] = history_variable;
  }
  environment[used] = NULL;

  execve(executable, arguments, environment);
  /* Still here: the exec failed, and the program never ran. */
  int code = errno;
  close(output);
  PRINT_ERROR("imagelog: ", command, ": cannot run ", executable, ": ", strerror(code));
  return IL_EXIT_FAILURE;
}
