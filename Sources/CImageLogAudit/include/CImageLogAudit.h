#ifndef CIMAGELOGAUDIT_H
#define CIMAGELOGAUDIT_H
/* The rtld-audit module `imagelog run` loads with LD_AUDIT (see rtld-audit(7)). It exports
   la_version, la_activity (to send each batch's records), la_objsearch (timing only), la_objopen and la_objclose; nothing here is
   called from Swift.

   Environment (set by `imagelog run`, removed from the program's environment by the module):
     IMAGELOG_AUDIT_FD        descriptor to write records to (the module is inert without it)
     IMAGELOG_AUDIT_START_NS  CLOCK_MONOTONIC nanoseconds when the CLI started the program
     IMAGELOG_AUDIT_MODULE    this module's path as put first in LD_AUDIT, to take it out again
                              (not set with --follow-exec: then LD_AUDIT and these stay)
     IMAGELOG_AUDIT_FOLLOW    set with --follow-exec: the descriptor stays open across exec, so
                              programs the command runs report too, each with its own PID

   Record: one line per event, fields separated by one space, numbers hex unless noted:
     IL1 KIND PID(dec) SINCE_START_NS(dec) STEP_NS(dec) LMID LINK_MAP BIAS LOAD_ADDRESS TEXT_END
         LOAD_END FILE_MAPPED_END BUILD_ID(hex bytes or -) BUILD_ID_ADDRESS(0 = none)
         E_MACHINE(dec) ELF_CLASS(32|64) IS_MAIN(0|1) PATH(rest of line, \\ and \xHH escaped)
   KIND: '+' added (la_objopen), '-' removed (la_objclose in dlclose), 'x' the main executable
   closed by _dl_fini: the process is exiting (the images closed after it are not reported). STEP_NS: for '+', the time since the loader started looking for this
   object (la_objsearch LA_SER_ORIG), or since the previous object was reported for the executable,
   the loader and the vDSO, which are not searched: the time it took to find, open and map it. */
#endif
