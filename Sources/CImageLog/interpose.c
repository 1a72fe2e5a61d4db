/* dlopen/dlmopen/dlclose interposers: the synchronous half of the image observers.
 *
 * Linked into an executable, these definitions come first in the global lookup scope, so calls from
 * the executable always reach them, and calls from a shared library reach them because the executable
 * exports them: GNU ld, gold and lld all put an executable's definition in .dynsym when a shared
 * library it links against (libc.so.6, glibc 2.34+) defines the same name, so no --export-dynamic
 * flag is needed (the tests check the test binary's .dynsym). Each forwards to the next definition
 * (libc's) and then, when the call succeeded and is the outermost loader call on this thread (so the
 * loader's lock is not held: constructors and destructors run under it), calls the hook Swift
 * installed. A failed call does not notify, so dlerror() still reports the failure.
 *
 * glibc resolves a bare name (no '/') and `$ORIGIN` against the *caller's* RPATH/RUNPATH and
 * directory, taking the caller from dlopen's return address. Forwarding makes the executable that
 * caller, so for a caller inside a shared library il_open_for redoes that part: `$ORIGIN` becomes the
 * caller's origin, and a bare name is looked up along the caller's RPATH/LD_LIBRARY_PATH/RUNPATH
 * directories (dlinfo RTLD_DI_SERINFO) before falling back to the ordinary search.
 *
 * pthread_create is interposed the same way, for the crash handler: while it is installed, each new
 * thread runs a trampoline that gives it an alternate signal stack before its start routine, so a
 * stack overflow on any thread is reported (a handler needs a stack to run on). The trampoline's
 * frame sits between start_thread and the start routine, as a sanitizer's interceptor does. */
#define _GNU_SOURCE
#include "CImageLog.h"
#include "CImageLogCrash.h"
#include <pthread.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

typedef void *(*il_dlopen_fn)(const char *, int);
typedef void *(*il_dlmopen_fn)(Lmid_t, const char *, int);
typedef int (*il_dlclose_fn)(void *);
typedef void (*il_hook_fn)(void);

static _Atomic(il_hook_fn) il_hook;
static _Atomic(il_dlopen_fn) il_next_dlopen;
static _Atomic(il_dlmopen_fn) il_next_dlmopen;
static _Atomic(il_dlclose_fn) il_next_dlclose;
static __thread int il_depth;
static _Atomic int il_observing;

/* glibc 2.35 brought _dl_find_object, 2.36 dlinfo(RTLD_DI_PHDR); without them the observers walk. */
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 36))
#define IL_HAVE_FIND_OBJECT_AND_DI_PHDR 1
#endif

/* What the notification running on this thread is about: the handle a dlopen returned, or the load
   bias of the object a dlclose was called for (see il_opened_object and il_closed_load_bias). Saved
   and restored around each notification, so one made by a handler's own dlopen or dlclose leaves the
   outer one's as it was. */
typedef struct {
  void *opened_handle;
  uintptr_t closing_bias;
  int closing_known;
} il_change_hint;
static __thread il_change_hint il_hint;

static void il_notify_with(il_change_hint hint);

/* dlsym(RTLD_NEXT) finds the definition after ours (libc's); racing threads store the same value. */
static il_dlopen_fn il_dlopen_next(void) {
  il_dlopen_fn next = atomic_load_explicit(&il_next_dlopen, memory_order_acquire);
  if (!next) {
    next = (il_dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
    atomic_store_explicit(&il_next_dlopen, next, memory_order_release);
  }
  return next;
}

static il_dlmopen_fn il_dlmopen_next(void) {
  il_dlmopen_fn next = atomic_load_explicit(&il_next_dlmopen, memory_order_acquire);
  if (!next) {
    next = (il_dlmopen_fn)dlsym(RTLD_NEXT, "dlmopen");
    atomic_store_explicit(&il_next_dlmopen, next, memory_order_release);
  }
  return next;
}

static il_dlclose_fn il_dlclose_next(void) {
  il_dlclose_fn next = atomic_load_explicit(&il_next_dlclose, memory_order_acquire);
  if (!next) {
    next = (il_dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
    atomic_store_explicit(&il_next_dlclose, next, memory_order_release);
  }
  return next;
}

void il_set_loader_hook(void (*hook)(void)) { atomic_store_explicit(&il_hook, hook, memory_order_release); }

void il_set_observing(int observing) { atomic_store_explicit(&il_observing, observing, memory_order_relaxed); }

int il_loader_call_depth(void) { return il_depth; }

void *il_real_dlopen(const char *file, int mode) { return il_dlopen_next()(file, mode); }

int il_real_dlclose(void *handle) { return il_dlclose_next()(handle); }

static void il_notify(void) {
  il_hook_fn hook = atomic_load_explicit(&il_hook, memory_order_acquire);
  if (!hook) return;
  int saved = errno;
  hook();
  errno = saved;
}

/* Replaces `$ORIGIN` and `${ORIGIN}` in `file` with `origin`; NULL when out of memory. */
static char *il_expand_origin(const char *file, const char *origin) {
  size_t origin_length = strlen(origin);
  size_t capacity = strlen(file) + 1;
  for (const char *p = strchr(file, '$'); p; p = strchr(p + 1, '$')) capacity += origin_length;
  char *result = malloc(capacity);
  if (!result) return NULL;
  char *out = result;
  const char *p = file;
  while (*p) {
    size_t skip = 0;
    if (strncmp(p, "${ORIGIN}", 9) == 0) {
      skip = 9;
    } else if (strncmp(p, "$ORIGIN", 7) == 0) {
      char next = p[7];
      int identifier = (next >= 'A' && next <= 'Z') || (next >= 'a' && next <= 'z') ||
                       (next >= '0' && next <= '9') || next == '_';
      if (!identifier) skip = 7;
    }
    if (skip) {
      memcpy(out, origin, origin_length);
      out += origin_length;
      p += skip;
    } else {
      *out++ = *p++;
    }
  }
  *out = '\0';
  return result;
}

/* Tries `dir/name` for each of the caller's non-default search directories. */
static void *il_open_along(struct link_map *caller, const char *name, int mode, il_dlopen_fn next) {
  Dl_serinfo size_info;
  if (dlinfo(caller, RTLD_DI_SERINFOSIZE, &size_info) != 0 || size_info.dls_size == 0) return NULL;
  Dl_serinfo *info = malloc(size_info.dls_size);
  if (!info) return NULL;
  if (dlinfo(caller, RTLD_DI_SERINFOSIZE, info) != 0 || dlinfo(caller, RTLD_DI_SERINFO, info) != 0) {
    free(info);
    return NULL;
  }
  void *handle = NULL;
  char candidate[PATH_MAX];
  for (unsigned int index = 0; index < info->dls_cnt && !handle; index++) {
    const Dl_serpath *entry = &info->dls_serpath[index];
    if (entry->dls_flags & LA_SER_DEFAULT) continue;  /* the ordinary search covers these, cache first */
    size_t dir_length = strlen(entry->dls_name);
    if (dir_length + 1 + strlen(name) + 1 > sizeof candidate) continue;
    memcpy(candidate, entry->dls_name, dir_length);
    candidate[dir_length] = '/';
    strcpy(candidate + dir_length + 1, name);
    if (access(candidate, F_OK) == 0) handle = next(candidate, mode);
  }
  free(info);
  return handle;
}

/* dlopen as glibc would do it for a call made at `caller`. */
static void *il_open_for(const void *caller, const char *file, int mode) {
  il_dlopen_fn next = il_dlopen_next();
  if (!file || (!strchr(file, '$') && strchr(file, '/')) || getauxval(AT_SECURE)) return next(file, mode);
  struct link_map *map = NULL;
  Dl_info info;
  if (!dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) || !map || !map->l_name || !map->l_name[0]) {
    return next(file, mode);  /* the main executable (or unknown): glibc uses the main map too */
  }
  void *handle = NULL;
  char *expanded = NULL;
  const char *name = file;
  if (strchr(file, '$')) {
    char origin[PATH_MAX];
    if (dlinfo(map, RTLD_DI_ORIGIN, origin) == 0 && (expanded = il_expand_origin(file, origin))) name = expanded;
  }
  if (strchr(name, '/')) {
    handle = next(name, mode);
  } else {
    /* glibc first matches names of objects already loaded; RTLD_NOLOAD asks exactly that. */
    handle = next(name, mode | RTLD_NOLOAD);
    if (!handle) handle = il_open_along(map, name, mode, next);
    if (!handle) handle = next(name, mode);
  }
  free(expanded);
  return handle;
}

void *dlopen(const char *file, int mode) {
  const void *caller = __builtin_return_address(0);
  il_depth++;
  void *handle = il_open_for(caller, file, mode);
  il_depth--;
  if (handle && il_depth == 0) il_notify_with((il_change_hint){ .opened_handle = handle });
  return handle;
}

int il_opened_object(uint64_t last_load_address, il_object *object) {
#ifdef IL_HAVE_FIND_OBJECT_AND_DI_PHDR
  /* In glibc a handle is the object's link map (what dlinfo RTLD_DI_LINKMAP returns); the handle
     keeps it loaded while this runs, so its own fields can be read. l_next and l_prev change when
     another thread loads or unloads a neighbour: read once, atomically. A value that is stale by the
     time it is used is caught by the caller, which checks the loader's counters after this. */
  struct link_map *map = il_hint.opened_handle;
  if (!map || map->l_addr == 0) return 0;
  struct link_map *next = __atomic_load_n(&map->l_next, __ATOMIC_ACQUIRE);
  struct link_map *previous = __atomic_load_n(&map->l_prev, __ATOMIC_ACQUIRE);
  if (next || !previous) return 0;
  struct dl_find_object last;
  if (_dl_find_object((void *)(uintptr_t)last_load_address, &last) != 0 || last.dlfo_link_map != previous) return 0;
  const void *phdrs = NULL;
  int count = dlinfo(map, RTLD_DI_PHDR, &phdrs);
  if (count <= 0 || count > UINT16_MAX || !phdrs) return 0;
  object->load_bias = (uintptr_t)map->l_addr;
  object->name = map->l_name ? map->l_name : "";
  object->name_length = strlen(object->name);
  object->phdrs = phdrs;
  object->phnum = (uint16_t)count;
  return 1;
#else
  (void)last_load_address;
  (void)object;
  return 0;
#endif
}

void *dlmopen(Lmid_t namespace_id, const char *file, int mode) {
  il_depth++;
  void *handle = il_dlmopen_next()(namespace_id, file, mode);
  il_depth--;
  if (handle && il_depth == 0) il_notify();
  return handle;
}

int il_closed_load_bias(uintptr_t *bias) {
  if (!il_hint.closing_known) return 0;
  *bias = il_hint.closing_bias;
  return 1;
}

static void il_notify_with(il_change_hint hint) {
  il_change_hint outer = il_hint;
  il_hint = hint;
  il_notify();
  il_hint = outer;
}

int dlclose(void *handle) {
  /* Only an outermost call with observers to tell: the load bias lets them find what it unloaded
     without walking the whole list (see LoaderView.removeClosed). Read before the call, while the
     handle is valid: in glibc a handle is the object's link map (what dlinfo RTLD_DI_LINKMAP returns),
     and l_addr its load bias. */
  il_change_hint hint = {0};
#ifdef __GLIBC__
  if (il_depth == 0 && atomic_load_explicit(&il_observing, memory_order_relaxed) && (uintptr_t)handle >= 4096) {
    hint.closing_bias = (uintptr_t)((const struct link_map *)handle)->l_addr;
    hint.closing_known = 1;
  }
#endif
  il_depth++;
  int result = il_dlclose_next()(handle);
  il_depth--;
  if (result == 0 && il_depth == 0) il_notify_with(hint);
  return result;
}

int il_address_is_loaded(uint64_t address) {
#ifdef IL_HAVE_FIND_OBJECT_AND_DI_PHDR
  struct dl_find_object found;
  return _dl_find_object((void *)(uintptr_t)address, &found) == 0 ? 1 : 0;
#else
  (void)address;
  return -1;
#endif
}

/* ---- pthread_create ---- */

typedef int (*il_pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static _Atomic(il_pthread_create_fn) il_next_pthread_create;

typedef struct {
  void *(*start)(void *);
  void *argument;
} il_thread_start;

static void *il_thread_trampoline(void *boxed) {
  il_thread_start start = *(il_thread_start *)boxed;
  free(boxed);
  if (il_crash_installed()) il_crash_prepare_new_thread();  /* a thread without one is still reported, unless it overflows */
  return start.start(start.argument);
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attributes, void *(*start)(void *), void *argument) {
  il_pthread_create_fn next = atomic_load_explicit(&il_next_pthread_create, memory_order_acquire);
  if (!next) {
    next = (il_pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
    atomic_store_explicit(&il_next_pthread_create, next, memory_order_release);
  }
  if (!il_crash_installed()) return next(thread, attributes, start, argument);
  il_thread_start *boxed = malloc(sizeof *boxed);
  if (!boxed) return next(thread, attributes, start, argument);
  boxed->start = start;
  boxed->argument = argument;
  int result = next(thread, attributes, il_thread_trampoline, boxed);
  if (result != 0) free(boxed);
  return result;
}
