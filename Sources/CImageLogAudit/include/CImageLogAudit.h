#ifndef CIMAGELOGAUDIT_H
#define CIMAGELOGAUDIT_H
/* The rtld-audit module `imagelog run` names in LD_AUDIT before it execs the command (see
   rtld-audit(7)). It exports la_version, la_objsearch (timing only), la_objopen and la_objclose,
   and writes one line per event, formatted as ImageFormatter formats it (CImageLogImage.h); nothing
   here is called from Swift.

   Environment (set by `imagelog run`):
     IMAGELOG_AUDIT_FD          the descriptor to write lines to (the module is inert without it)
     IMAGELOG_AUDIT_FILE        DEV:INODE of that descriptor's file (decimal): a process where the
                                number names another file stays silent
     IMAGELOG_AUDIT_FORMAT      logger (default), crash, unstrip or json
     IMAGELOG_AUDIT_FULL_BUILD_IDS, IMAGELOG_AUDIT_TIMING   set: the options of the same names
     IMAGELOG_AUDIT_START_NS    CLOCK_MONOTONIC nanoseconds when imagelog started (for timing)
     IMAGELOG_AUDIT_PID         the command's PID (imagelog's own): lines from any other process
                                carry "[pid N] " (JSON: a leading "pid" field)
     IMAGELOG_AUDIT_NO_FOLLOW   set: the module takes itself out of LD_AUDIT and these variables
                                out of the environment, and makes the descriptor close-on-exec,
                                so only the command's process (and its forks) report
     IMAGELOG_AUDIT_MODULE      this module's path as put first in LD_AUDIT, to take it out again */
#endif
