// The statically linked Swift runtime finds `CommandLine.arguments` with a static initializer
// (CommandLine.cpp's ArgvGrabber) that opens /proc/self/maps, scans it line by line with sscanf to
// find the stack, then walks back from `environ`: work and a /proc read (BENCHMARKS.md) at
// every start of a process whose runs are mostly start-up. glibc passes argc and argv to the
// executable's constructors, so the executable defines the two functions of that archive member
// itself: the linker then never takes the member from libswiftCore.a, and its initializer never runs.
// Linked into the imagelog executable only (the libraries leave the runtime as it is). Should the
// runtime's archive member change (another symbol defined there and used elsewhere), the link fails
// with a duplicate definition rather than silently running both.
#include "CImageLogMain.h"

#include <stddef.h>
#include <string.h>
#include <unistd.h>

static char **saved_argv;
static int saved_argc;
static char **override_argv;
static int override_argc;

// Priority 101, the first one programs may use: before any default-priority initializer that could ask.
__attribute__((constructor(101))) static void il_capture_argv(int argc, char **argv, char **envp) {
  saved_argc = argc;
  saved_argv = argv;
  // `imagelog run` becomes the command it runs: done here, before the runtime's initializers and
  // main, whose work the command could not use (run.c). Help is left to the Swift side, and so is
  // making a missing crash directory (RunCommand, with core-handler's CrashFolder).
  if (argc > 1 && strcmp(argv[1], "run") == 0 && !il_run_wants_help(argc, argv)) {
    int status = il_run(argc, argv, envp);
    if (status != IL_RUN_MAKE_CRASH_DIRECTORY) _exit(status);
  }
}

// Swift calling convention, as the runtime declares them (SWIFT_CC(swift)).
__attribute__((swiftcall)) char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen) {
  if (override_argv != NULL) {
    *outArgLen = override_argc;
    return override_argv;
  }
  static char *empty[] = {NULL};
  if (saved_argv == NULL) {
    *outArgLen = 0;
    return empty;
  }
  *outArgLen = saved_argc;
  return saved_argv;
}

__attribute__((swiftcall)) void _swift_stdlib_overrideUnsafeArgvArgc(char **argv, int argc) {
  override_argv = argv;
  override_argc = argc;
}
