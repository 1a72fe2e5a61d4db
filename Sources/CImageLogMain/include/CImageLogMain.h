// The imagelog executable's own C part: argv.c defines the Swift runtime's two CommandLine functions
// for the statically linked executable, and its first constructor hands `imagelog run` to run.c
// before the Swift runtime starts (see both files).
#ifndef CIMAGELOG_MAIN_H
#define CIMAGELOG_MAIN_H

/// `imagelog run`'s USAGE line (its help text is RunCommand's; its usage errors are il_run's).
extern const char *const il_run_usage;

/// True when `argv` (argv[1] being "run") asks for help: `--help` or `-h` before the first `--`, as
/// ImageLogMain's dispatch looks for it. Help is the Swift side's.
int il_run_wants_help(int argc, char **argv);

/// `imagelog run ARGUMENTS`, argv[1] being "run": reads the options, prepares the environment and the
/// output descriptor, and executes the command in this process. Returns only when it could not: the
/// exit status (1 a failure, 64 a usage error), having said why on standard error, or
/// IL_RUN_MAKE_CRASH_DIRECTORY.
int il_run(int argc, char **argv, char **envp);

/// What il_run returns when `--crash-dir` names a folder that does not exist: the caller makes it
/// (il_run_crash_directory_to_make says which) and calls il_run again.
enum { IL_RUN_MAKE_CRASH_DIRECTORY = -1 };

/// The `--crash-dir` folder il_run found missing, or NULL.
const char *il_run_crash_directory_to_make(void);

#endif
