#ifndef CIMAGELOG_H
#define CIMAGELOG_H
/* The only C the Swift side sees. Every function is prefixed il_. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "CImageLogCrash.h" /* crash-time image table and handler (crash_*.c) */
#include "CImageLogImage.h" /* one image's layout, build-id and line (header-only) */
#include "CImageLogProcess.h" /* other processes, worker threads, libcurl's calls (CImageLogProcess) */

/* One loaded object as dl_iterate_phdr(3) reports it (see il_walk_objects). Pointers live for the
   callback only. */
typedef struct {
  uintptr_t load_bias;   /* dlpi_addr */
  const char *name;      /* dlpi_name: "" for the main executable (and often the vDSO) */
  const void *phdrs;     /* dlpi_phdr: ElfW(Phdr)[phnum], in memory */
  uint16_t phnum;        /* dlpi_phnum */
  uint64_t adds, subs;   /* dlpi_adds / dlpi_subs: cheap change detection */
  size_t name_length;    /* strlen(name) */
} il_object;

/* What identifies a loaded object while it stays loaded: its load bias and where its program
   headers are (inside its own mapping, or a loader allocation). */
typedef struct {
  uintptr_t load_bias;
  const void *phdrs;
} il_object_key;

/* One walk that compares the loader's list with the objects a caller already knows. */
typedef struct {
  /* In: the known objects, in load order (NULL when none). */
  const il_object_key *keys;
  size_t key_count;
  /* In: when non-zero, an object equal to keys[cursor] only advances the cursor; visit is not called. */
  int match_keys;
  /* In: when non-zero, the walk stops at the first object if its counters equal known_adds/known_subs. */
  int stop_if_unchanged;
  uint64_t known_adds, known_subs;
  /* In and out: the next known object expected; visit may move it. */
  size_t cursor;
  /* Out: the current object's position in the loader's list (inside visit), then the object count. */
  size_t index;
  /* Out: the counters of the first object; whether the walk stopped because they were unchanged. */
  uint64_t adds, subs;
  int unchanged;
} il_walk;

/* dl_iterate_phdr(3) over the list, calling visit for the objects that are not the expected known one
   (all of them without match_keys). Stops when visit returns non-zero. The loader's list lock is
   held meanwhile: visit may read the object's mapped program headers and notes. */
int il_walk_objects(il_walk *walk, int (*visit)(const il_object *object, il_walk *walk, void *context),
                    void *context);

/* il_layout, il_note_area and the image line are in CImageLogImage.h (shared with the audit module). */

/* Fills `layout`; returns 0 (layout unset) when the object has no PT_LOAD, or a PT_LOAD's
   p_vaddr + p_memsz overflows 64 bits. A PT_LOAD whose p_vaddr + p_filesz overflows adds nothing
   to file_end; a rounding that would overflow is left unrounded. */
int il_object_layout(const il_object *object, uint64_t page_size, il_layout *layout);

/* The next mapped PT_NOTE at or after program header `*index`, in header order; advances `*index`
   past it. Returns 0 when there is none left. Skips a PT_NOTE that is empty, whose end overflows,
   larger than INTPTR_MAX (an Int), or that no PT_LOAD's file bytes (p_vaddr..p_vaddr + p_filesz,
   not wrapping) contain. */
int il_object_next_note(const il_object *object, uint16_t *index, il_note_area *note);

/* The loader's change counters without a full walk (from the first object's dlpi_adds/dlpi_subs). */
void il_loader_counters(uint64_t *adds, uint64_t *subs);

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

/* Whether any observer is registered: dlclose then notes the load bias of the object it closes. */
void il_set_observing(int observing);

/* Inside the hook run after an outermost dlclose: the load bias (l_addr) of the object that dlclose
   was called for, read before it ran. 0 when unknown (not after a dlclose, or no observers then). */
int il_closed_load_bias(uintptr_t *bias);

/* Inside the hook run after an outermost dlopen: fills `object` with the object that dlopen returned
   (its link map's load bias and name, its program headers from dlinfo RTLD_DI_PHDR) when that object
   is the last one in dl_iterate_phdr's order right after the loaded object containing
   `last_load_address` (its link map's l_prev, and no l_next); 0 otherwise or without glibc 2.36. */
int il_opened_object(uint64_t last_load_address, il_object *object);

/* Whether a loaded object contains `address`: 1 or 0, from _dl_find_object (no lock); -1 when built
   against a glibc before 2.36 (the observers' shortcuts need it and dlinfo RTLD_DI_PHDR). */
int il_address_is_loaded(uint64_t address);

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
