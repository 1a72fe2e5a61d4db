#ifndef CIMAGELOGAUDIT_H
#define CIMAGELOGAUDIT_H
/* The rtld-audit module `imagelog run` loads with LD_AUDIT (see rtld-audit(7)). It exports
   la_version, la_activity (to send each batch's records, or ring), la_objsearch (timing only), la_objopen
   and la_objclose; nothing here is called from Swift (the reader's side of the ring is
   CImageLog/ring.c).

   Environment (set by `imagelog run`, removed from the program's environment by the module):
     IMAGELOG_AUDIT_FD        descriptor to write records to (the module is inert without it)
     IMAGELOG_AUDIT_START_NS  CLOCK_MONOTONIC nanoseconds when the CLI started the program
     IMAGELOG_AUDIT_MODULE    this module's path as put first in LD_AUDIT, to take it out again
                              (not set with --follow-exec: then LD_AUDIT and these stay)
     IMAGELOG_AUDIT_FOLLOW    set with --follow-exec: the descriptor stays open across exec, so
                              programs the command runs report too, each with its own PID
     IMAGELOG_AUDIT_RING      a memfd holding the record ring (below); always removed from the
                              environment, and the descriptor closed once mapped

   The ring: 4096 bytes of header, then CAPACITY bytes of data (a power of two), records written
   as the lines below, wrapping at the end. Header, all fields native-endian: u64 magic
   0x474e495231314c49 ("IL11RING"), u64 capacity, u32 owner (0 until the first process that maps
   it claims it with a compare-and-swap to its PID: only that process writes; its forked children
   and the programs of --follow-exec use the socket), u32 reader_sleeping, u32 writer_waiting,
   u32 room_sequence (a futex word), u64 written at offset 64, u64 consumed at offset 128 (byte
   counts since the start; written is stored after the bytes). The writer copies each record in as
   it happens (so a crash or _exit loses nothing) and, at the end of a batch, sends one byte "\n"
   on the socket only when reader_sleeping was set (exchanging it to 0): the reader sets it, looks
   at written once more, and only then sleeps. When the ring is full the writer sets
   writer_waiting, rings, and waits on room_sequence, which the reader bumps and wakes after it
   has taken records. A "\n" alone on the socket is not a record.

   Record: one line per event, fields separated by one space, numbers hex unless noted:
     IL1 KIND PID(dec) SINCE_START_NS(dec) STEP_NS(dec) LMID LINK_MAP BIAS LOAD_ADDRESS TEXT_END
         LOAD_END FILE_MAPPED_END BUILD_ID(hex bytes or -) BUILD_ID_ADDRESS(0 = none)
         E_MACHINE(dec) ELF_CLASS(32|64) IS_MAIN(0|1) PATH(rest of line, \\ and \xHH escaped)
   KIND: '+' added (la_objopen), '-' removed (la_objclose in dlclose), 'x' the main executable
   closed by _dl_fini: the process is exiting (the images closed after it are not reported). STEP_NS: for '+', the time since the loader started looking for this
   object (la_objsearch LA_SER_ORIG), or since the previous object was reported for the executable,
   the loader and the vDSO, which are not searched: the time it took to find, open and map it. */
#endif
