#ifndef CIMAGELOG_H
#define CIMAGELOG_H
/* The only C the Swift side sees. Every function is prefixed il_. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "CImageLogCrash.h" /* crash-time image table and handler (crash.c) */
#include "CImageLogRing.h"  /* the record ring of imagelog run (ring.c) */

/* other processes */
/* Copies up to `length` bytes at `address` in process `pid` into `buffer`; returns the count
   copied or -1 with errno set. Mirrors process_vm_readv(2) with one local and one remote range. */
ssize_t il_read_process_memory(pid_t pid, uint64_t address, void *buffer, size_t length);
/* A descriptor that polls readable when `pid` (our child) exits, or -1. Mirrors pidfd_open(2). */
int il_pidfd_open(pid_t pid);
/* For `imagelog run`: SIGTERM and SIGHUP sent to us are sent on to `child`; SIGINT and SIGQUIT
   (which a terminal sends to the whole group, child included) are ignored by us. */
void il_forward_termination_signals(pid_t child);
/* For `imagelog watch`: SIGINT and SIGTERM set a flag and interrupt blocking calls (EINTR). */
void il_catch_interrupts(void);
/* True once il_catch_interrupts's handler has run. */
int il_was_interrupted(void);
/* end of other processes */

/* One loaded object as dl_iterate_phdr(3) reports it. Pointers live for the callback only. */
typedef struct {
  uintptr_t load_bias;   /* dlpi_addr */
  const char *name;      /* dlpi_name: "" for the main executable (and often the vDSO) */
  const void *phdrs;     /* dlpi_phdr: ElfW(Phdr)[phnum], in memory */
  uint16_t phnum;        /* dlpi_phnum */
  uint64_t adds, subs;   /* dlpi_adds / dlpi_subs: cheap change detection */
} il_object;

/* Calls visit for each loaded object in load order; stops when it returns non-zero and returns that
   value. Mirrors dl_iterate_phdr(3) (which holds the loader's list lock during the walk). */
int il_iterate_objects(int (*visit)(const il_object *object, void *context), void *context);

/* The loader's change counters without a full walk (from the first object's dlpi_adds/dlpi_subs). */
void il_loader_counters(uint64_t *adds, uint64_t *subs);

/* getauxval(AT_SYSINFO_EHDR): where the vDSO's ELF header is mapped, 0 when there is none. */
uint64_t il_vdso_address(void);

/* getauxval(AT_PAGESZ), or 4096 when the kernel did not say. */
uint64_t il_page_size(void);

/* What dladdr(3) knows about an address. Strings live as long as their object stays loaded. */
typedef struct {
  const char *file_name;    /* dli_fname */
  uint64_t file_base;       /* dli_fbase */
  const char *symbol_name;  /* dli_sname, NULL when unknown */
  uint64_t symbol_address;  /* dli_saddr, 0 when unknown */
} il_symbol_info;

/* Mirrors dladdr(3): non-zero when `address` lies in a loaded object. */
int il_lookup_address(uint64_t address, il_symbol_info *info);

/* --- dlopen/dlclose interposition (interpose.c) ---------------------------------------------
   The shim defines dlopen, dlmopen and dlclose. Linked into an executable, the executable's
   definitions come first in symbol lookup, so calls from the executable and (when the symbol is
   exported) from every shared library reach them. Each forwards to the next definition
   (dlsym(RTLD_NEXT)) and then, outside the loader's lock, calls the hook. */

/* Called after a successful outermost dlopen/dlmopen/dlclose on the calling thread. `NULL` turns
   notification off. The hook runs on the thread that called dlopen/dlclose. */
void il_set_loader_hook(void (*hook)(void));

/* How many dlopen/dlclose calls are under way on this thread (inside a constructor or destructor
   run by dlopen/dlclose this is non-zero: the loader's lock is held there). */
int il_loader_call_depth(void);

/* The real dlopen/dlclose, bypassing the interposers (for benchmarks and tests). */
void *il_real_dlopen(const char *file, int mode);
int il_real_dlclose(void *handle);

/* --- delivery gate (gate.c): lets a thread wait until events up to a sequence number were delivered. */

/* Records that every event up to `sequence` has been delivered and wakes the waiters. */
void il_gate_publish(uint64_t sequence);
/* Blocks until il_gate_publish has been called with a value >= `sequence`. */
void il_gate_wait(uint64_t sequence);
/* Whether this thread is delivering events now (its handlers may call dlopen: never wait then). */
void il_set_delivering(int delivering);
int il_is_delivering(void);

#endif
