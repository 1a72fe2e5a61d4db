/* A program that crashes on request, for CrashReporterTests. Built at test time with
     cc -g -O0 -fno-omit-frame-pointer -pthread -I Sources/CImageLog/include \
        -I Sources/CImageLogImage/include -I Sources/CImageLogUnwind/include -I Sources/CImageLogProcess/include \
        Sources/CImageLog/crash_*.c Sources/CImageLogUnwind/*.c Sources/CImageLog/interpose.c \
        Tests/Programs/crash-program.c -o crash-program -ldl
   Usage: crash-program MODE REPORT MAPS [THREADS]
   It fills the crash image table from its own dl_iterate_phdr snapshot (the Swift library fills
   it from the LoadedImages observers instead), installs the handler writing to REPORT, copies
   /proc/self/maps to MAPS, and crashes the way MODE says. The modes with named worker threads
   (qsort, library, mainworkers, blocked, bench, capture) also write each thread's "tid name" as /proc
   has it to MAPS.threads just before the crash; THREADS is how many threads bench runs (main included).
   Out-of-process capture (crash_helper.c): with CRASH_HELPER (an absolute path) and CRASH_DIR set the
   handler starts that helper first (CRASH_HELPER_TIMEOUT_MS, default 30000); REPORT "-" sends the
   in-process report into CRASH_DIR too. CRASH_SIGCHLD=ignore or handle sets SIGCHLD to SIG_IGN, or
   to a handler that reaps every child it can (waitpid(-1)), before the crash.
   vfork: a vfork child crashes before it executes anything, then the parent. nofile: RLIMIT_NOFILE 3
   (no descriptor left to open), then null. forkhang (built with
   -DIL_HELPER_TEST_HOOKS, with a helper): a child forked while the handler's pipes are open lives on.
   unloaded: calls into the plugin CRASH_PLUGIN (unloaded-plugin.c) after closing it; with CRASH_OTHER
   (unloaded-other.c) loaded where the plugin was first, the call traps in that library.
   unloaded-thread: the plugin starts a thread waiting in read(2) in its plugin_thread, is closed, then
   the read is answered: that thread returns into unmapped memory. Prints "plugin_thread 0x...". */
#define _GNU_SOURCE
#include "CImageLogCrash.h"
#include "test-threads.h"

#include <dlfcn.h>
#include <elf.h>
#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the table, from dl_iterate_phdr, formatted in the crash style ---- */

/* When set, add_image adds only the image loaded there (the unloaded mode's plugin). */
static uint64_t add_only;

static int add_image(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size;
  int *index = context;
  int is_main = (*index)++ == 0;
  char path[4096];
  if (is_main) {
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    path[n > 0 ? n : 0] = '\0';
  } else if (strncmp(info->dlpi_name, "linux-vdso", 10) == 0 || info->dlpi_name[0] == '\0') {
    strcpy(path, "[vdso]");
  } else {
    snprintf(path, sizeof path, "%s", info->dlpi_name);
  }
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  uint64_t first = UINT64_MAX, text_end = 0, load_end = 0;
  unsigned char uuid[16] = {0}, build_id[64];
  size_t build_id_size = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD) {
      uint64_t start = ph->p_vaddr & ~(uint64_t)(ph->p_align > 1 ? ph->p_align - 1 : 0);
      if (start < first) first = start;
      if ((ph->p_flags & PF_X) && ph->p_vaddr + ph->p_memsz > text_end) text_end = ph->p_vaddr + ph->p_memsz;
      if (ph->p_vaddr + ph->p_memsz > load_end) load_end = ph->p_vaddr + ph->p_memsz;
    } else if (ph->p_type == PT_NOTE) {
      const unsigned char *note = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
      size_t offset = 0;
      while (offset + 12 <= ph->p_memsz) {
        uint32_t namesz, descsz, type;
        memcpy(&namesz, note + offset, 4);
        memcpy(&descsz, note + offset + 4, 4);
        memcpy(&type, note + offset + 8, 4);
        size_t name_at = offset + 12, desc_at = name_at + ((namesz + 3) & ~3u);
        if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(note + name_at, "GNU", 4) == 0) {
          memcpy(uuid, note + desc_at, descsz < 16 ? descsz : 16);
          build_id_size = descsz < sizeof build_id ? descsz : sizeof build_id;
          memcpy(build_id, note + desc_at, build_id_size);
        }
        offset = desc_at + ((descsz + 3) & ~3u);
      }
    }
  }
  if (first == UINT64_MAX) return 0;
  uint64_t load = info->dlpi_addr + first, end = info->dlpi_addr + text_end;
  if (add_only != 0 && load != add_only) return 0;
#if defined(__x86_64__)
  const char *arch = "x86_64";
#else
  const char *arch = "arm64";
#endif
  char line[8192];
  int n = snprintf(line, sizeof line, "0x%llx - 0x%llx %s%s %s  <", (unsigned long long)load,
                   (unsigned long long)(end - 1), is_main ? "+" : "", name, arch);
  for (int i = 0; i < 16; i++) n += snprintf(line + n, sizeof line - n, "%02x", uuid[i]);
  snprintf(line + n, sizeof line - n, "> %s", path);
  if (il_crash_table_add_image(load, info->dlpi_addr + load_end, load, end, name, line, path, build_id,
                               build_id_size) != 0)
    perror("il_crash_table_add_image");
  return 0;
}

/* ---- ways to die ---- */

/* timeline: opens CRASH_PLUGIN then CRASH_OTHER, closes them in the same order (each put in and taken
   out of the table as the Swift library's observers would), then dies on a null pointer: the report's
   Image Timeline has the four events, oldest first. */
void crash_null_dereference(void);
static void open_into_table(const char *path, void **handle, uint64_t *base) {
  *handle = path != NULL ? dlopen(path, RTLD_NOW) : NULL;
  if (*handle == NULL) {
    fprintf(stderr, "cannot open %s: %s\n", path != NULL ? path : "(unset)", dlerror());
    exit(2);
  }
  Dl_info where;
  void *symbol = dlsym(*handle, "plugin_work");
  if (symbol == NULL) symbol = dlsym(*handle, "other_traps");
  if (symbol == NULL || dladdr(symbol, &where) == 0) exit(3);
  *base = (uint64_t)(uintptr_t)where.dli_fbase;
  int index = 1;
  add_only = *base;
  dl_iterate_phdr(add_image, &index);
}

__attribute__((noinline)) void crash_after_timeline(void) {
  void *plugin, *other;
  uint64_t plugin_base, other_base;
  open_into_table(getenv("CRASH_PLUGIN"), &plugin, &plugin_base);
  open_into_table(getenv("CRASH_OTHER"), &other, &other_base);
  dlclose(plugin);
  il_crash_table_remove(plugin_base);
  dlclose(other);
  il_crash_table_remove(other_base);
  printf("bases 0x%llx 0x%llx\n", (unsigned long long)plugin_base, (unsigned long long)other_base);
  fflush(stdout);
  crash_null_dereference();
}

/* unloaded: opens the plugin CRASH_PLUGIN names, puts it in the table (as the Swift library's observers
   would), keeps a pointer to its plugin_work, closes it (the table keeps it among the removed images),
   then calls the pointer: the pc is in memory no longer mapped. */
__attribute__((noinline)) void crash_call_unloaded(int from_thread) {
  const char *plugin = getenv("CRASH_PLUGIN");
  void *handle = plugin != NULL ? dlopen(plugin, RTLD_NOW) : NULL;
  if (handle == NULL) {
    fprintf(stderr, "cannot open the plugin: %s\n", dlerror());
    exit(2);
  }
  int (*volatile work)(int) = (int (*)(int))dlsym(handle, "plugin_work");
  Dl_info where;
  if (work == NULL || dladdr((void *)work, &where) == 0) exit(3);
  int ends[2] = {-1, -1}, ready[2] = {-1, -1};
  char byte;
  void *thread_function = dlsym(handle, "plugin_thread");
  int (*start)(int, int) = (int (*)(int, int))dlsym(handle, "plugin_start_thread");
  if (from_thread && (thread_function == NULL || start == NULL || pipe(ends) != 0 || pipe(ready) != 0
                      || start(ends[0], ready[1]) != 0 || read(ready[0], &byte, 1) != 1))
    exit(5);
  int index = 1;  /* not the main executable */
  add_only = (uint64_t)(uintptr_t)where.dli_fbase;
  dl_iterate_phdr(add_image, &index);
  dlclose(handle);
  il_crash_table_remove((uint64_t)(uintptr_t)where.dli_fbase);
  const char *other = getenv("CRASH_OTHER");
  if (other != NULL) {
    /* Another library mapped where the plugin was (and put in the table): the call traps in it. */
    Dl_info now;
    if (dlopen(other, RTLD_NOW) == NULL || dladdr((void *)work, &now) == 0 || now.dli_fname == NULL ||
        strcmp(now.dli_fname, other) != 0) {
      fprintf(stderr, "CRASH_OTHER was not mapped where the plugin was\n");
      exit(4);
    }
    add_only = (uint64_t)(uintptr_t)now.dli_fbase;
    dl_iterate_phdr(add_image, &index);
  }
  if (from_thread) {
    /* The plugin's thread, left running, reads on: it returns into the plugin's unmapped code. */
    printf("plugin_thread %p\n", thread_function);
    fflush(stdout);
    if (write(ends[1], "x", 1) != 1) exit(6);
    for (;;) pause();
  }
  printf("plugin_work %p\n", (void *)work);
  fflush(stdout);
  work(1);
}

__attribute__((noinline)) void crash_null_dereference(void) {
  volatile int *volatile pointer = NULL;  /* both volatile: even -O2 stores through it */
  *pointer = 42;
}

__attribute__((noinline)) void crash_abort(void) { abort(); }

__attribute__((noinline)) int crash_recurse(int depth) {
  volatile char pad[512];
  pad[0] = (char)depth;
  return crash_recurse(depth + 1) + pad[0];
}

__attribute__((noinline)) void crash_divide(void) {
  volatile int zero = 0;
  volatile int seven = 7;
  volatile int result = seven / zero;
  (void)result;
}

__attribute__((noinline)) void crash_breakpoint(void) {
#if defined(__x86_64__)
  __asm__ volatile("int3");
#else
  __asm__ volatile("brk #0");
#endif
}

__attribute__((noinline)) void crash_call_null(void) {
  void (*volatile function)(void) = NULL;
  function();
}

static void *second_thread(void *unused) {
  (void)unused;
  crash_null_dereference();
  return NULL;
}

/* A second thread's stack overflow: reported only because the thread has its own alternate stack
   (sigaltstack is per thread; il_crash_install gives one to the thread that calls it). */
static void *second_thread_overflow(void *unused) {
  (void)unused;
  if (il_crash_prepare_thread() != 0) return NULL;
  crash_recurse(0);
  return NULL;
}

/* A thread created after install that overflows its stack: reported only when the pthread_create
   interposer (interpose.c, linked in) gave it an alternate signal stack. */
static void *overflowing_thread(void *unused) {
  (void)unused;
  crash_recurse(0);
  return NULL;
}

/* How many malloc_loop threads have been through malloc and free once: main crashes only when all
   are busy in the allocator, so one of them may hold the arena lock when the handler runs. */
static atomic_int malloc_threads_running;

static void *malloc_loop(void *unused) {
  (void)unused;
  for (int round = 0;; round++) {
    void *blocks[16];
    for (int i = 0; i < 16; i++) blocks[i] = malloc(1024 + 64 * i);
    for (int i = 0; i < 16; i++) free(blocks[i]);
    if (round == 0) atomic_fetch_add(&malloc_threads_running, 1);
  }
  return NULL;
}

/* Corrupts the size of the chunk after a 1 KiB block, then frees the block. With tcache off
   (GLIBC_TUNABLES=glibc.malloc.tcache_count=0) and one arena (MALLOC_ARENA_MAX=1) glibc finds it
   in _int_free with the arena lock held ("free(): invalid next size (normal)") and calls abort():
   the crash handler runs while its own thread holds the allocator lock the other threads want.
   The two chunks are allocated before the other threads start, and checked to be neighbours. */
static char *heap_block, *heap_next;

static void prepare_heap_corruption(void) {
  for (int attempt = 0; attempt < 64; attempt++) {
    char *block = malloc(1024), *next = malloc(1024);
    size_t size = ((size_t *)block)[-1] & ~(size_t)7;  /* the block's chunk size */
    if (next == block + size) {
      heap_block = block;
      heap_next = next;
      return;
    }
  }
}

__attribute__((noinline)) void crash_corrupt_heap(void) {
  if (heap_block == NULL) return;
  ((size_t *)heap_next)[-1] = 1;  /* the next chunk's size field: size 0, PREV_INUSE */
  free(heap_block);
}

/* ---- churn: the table is never torn ----
   The main thread adds and removes fake images as fast as it can while (a) another thread and
   (b) a timer signal aimed at the main thread itself write the table with
   il_crash_write_binary_images into a pipe, read it back and check every line is one of the
   lines that were ever added, whole, and the count is one a complete table can have. The signal
   often lands inside il_crash_table_add/remove on the same thread: it must neither wait nor see
   a half-built table. Prints counts; exits 0 when nothing was torn. */

enum { FAKE_COUNT = 64, FAKE_LIVE = 24, CHURN_UPDATES = 30000 };
static char fake_lines[FAKE_COUNT][320];
static char real_lines[64][8192];
static int real_count;
static volatile sig_atomic_t torn, signal_snapshots, interrupted_updates, in_update;
static volatile int churn_done;

static int known_line(const char *line, size_t length) {
  for (int i = 0; i < FAKE_COUNT; i++)
    if (strlen(fake_lines[i]) == length && memcmp(fake_lines[i], line, length) == 0) return 1;
  for (int i = 0; i < real_count; i++)
    if (strlen(real_lines[i]) == length && memcmp(real_lines[i], line, length) == 0) return 1;
  return 0;
}

/* Async-signal-safe: write, read, memcmp. Returns 1 when the snapshot is whole. */
static int check_snapshot(int pipe_in, int pipe_out) {
  static __thread char buffer[65536];
  ssize_t written = il_crash_write_binary_images(pipe_in);
  if (written <= 0 || (size_t)written > sizeof buffer) return 0;
  ssize_t got = 0;
  while (got < written) {
    ssize_t n = read(pipe_out, buffer + got, (size_t)(written - got));
    if (n <= 0) return 0;
    got += n;
  }
  int lines = 0;
  size_t start = 0;
  for (size_t i = 0; i < (size_t)got; i++) {
    if (buffer[i] != '\n') continue;
    if (!known_line(buffer + start, i - start)) return 0;
    lines++;
    start = i + 1;
  }
  if (start != (size_t)got) return 0;
  /* between updates FAKE_LIVE fakes are in; inside one, FAKE_LIVE + 1 (added, not yet removed) */
  return lines == real_count + FAKE_LIVE || lines == real_count + FAKE_LIVE + 1;
}

static int signal_pipe[2];
static void on_timer(int signal) {
  (void)signal;
  if (in_update) interrupted_updates++;
  if (!check_snapshot(signal_pipe[1], signal_pipe[0])) torn++;
  signal_snapshots++;
}

static void *reader_loop(void *count) {
  int reader_pipe[2];
  if (pipe(reader_pipe) != 0) return NULL;
  while (!churn_done) {
    if (!check_snapshot(reader_pipe[1], reader_pipe[0])) torn++;
    (*(long *)count)++;
  }
  return NULL;
}

static void fake_add(int k) {
  uint64_t load = 0x100000000000ull + (uint64_t)k * 0x100000;
  in_update = 1;
  il_crash_table_add(load, load, load + 0x1000, "fake", fake_lines[k]);
  in_update = 0;
}

static void fake_remove(int k) {
  in_update = 1;
  il_crash_table_remove(0x100000000000ull + (uint64_t)k * 0x100000);
  in_update = 0;
}

static int churn(void) {
  for (int k = 0; k < FAKE_COUNT; k++) {
    uint64_t load = 0x100000000000ull + (uint64_t)k * 0x100000;
    int n = snprintf(fake_lines[k], sizeof fake_lines[k], "0x%llx - 0x%llx fake%d x86_64  <%032x> /fake/%d/",
                     (unsigned long long)load, (unsigned long long)(load + 0xfff), k, k, k);
    while (n < 300) fake_lines[k][n++] = (char)('a' + k % 26);  /* long lines: more to tear */
    fake_lines[k][n] = '\0';
  }
  int fd = il_crash_open_report("/dev/null");
  (void)fd;
  /* the real lines: what the table holds before churning */
  int probe[2];
  if (pipe(probe) != 0) return 1;
  static char text[65536];
  ssize_t n = il_crash_write_binary_images(probe[1]);
  n = n > 0 ? read(probe[0], text, sizeof text - 1) : 0;
  text[n > 0 ? n : 0] = '\0';
  for (char *line = strtok(text, "\n"); line && real_count < 64; line = strtok(NULL, "\n"))
    snprintf(real_lines[real_count++], sizeof real_lines[0], "%s", line);
  for (int k = 0; k < FAKE_LIVE; k++) fake_add(k);

  if (pipe(signal_pipe) != 0) return 1;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_timer;
  action.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &action, NULL);
  struct sigevent event;
  memset(&event, 0, sizeof event);
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = SIGALRM;
  event._sigev_un._tid = gettid();  /* aimed at this (the writer) thread */
  timer_t timer;
  if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) return 1;
  struct itimerspec every = {{0, 100 * 1000}, {0, 100 * 1000}};
  timer_settime(timer, 0, &every, NULL);

  long reads = 0;
  pthread_t reader;
  pthread_create(&reader, NULL, reader_loop, &reads);
  /* At least CHURN_UPDATES pairs, and on a loaded machine more (up to 10x) until the reader thread
     has run and a signal has landed inside an update. */
  int updates = 0;
  while (updates < CHURN_UPDATES ||
         (updates < 10 * CHURN_UPDATES && (*(volatile long *)&reads == 0 || interrupted_updates == 0))) {
    fake_add((updates + FAKE_LIVE) % FAKE_COUNT);
    fake_remove(updates % FAKE_COUNT);
    updates++;
  }
  struct itimerspec stop = {{0, 0}, {0, 0}};
  timer_settime(timer, 0, &stop, NULL);
  churn_done = 1;
  pthread_join(reader, NULL);
  printf("updates=%d reader-snapshots=%ld signal-snapshots=%d interrupted-updates=%d torn=%d\n", updates * 2,
         reads, (int)signal_snapshots, (int)interrupted_updates, (int)torn);
  return torn == 0 ? 0 : 1;
}

/* ---- named worker threads ---- */

static atomic_int workers_ready, worker_slots;
static pid_t worker_tids[1024];
static int worker_count;
static int never_written[2] = {-1, -1};
static const char *threads_path;

static int asleep(pid_t tid) { return test_thread_asleep(tid); }

/* Waits until every worker (and, from another thread, the main thread) sleeps where the test
   expects it, so each thread's frames are the same in every run and under gdb. */
static void wait_until_all_asleep(int main_too) {
  for (int i = 0; i < worker_count; i++)
    while (!asleep(worker_tids[i])) sched_yield();
  while (main_too && !asleep(getpid())) sched_yield();
}

/* Blocks in read(2) on a pipe nobody writes: a thread asleep in a system call, as most are. */
static void *sleeping_worker(void *name) {
  pthread_setname_np(pthread_self(), name);
  worker_tids[atomic_fetch_add(&worker_slots, 1)] = gettid();
  atomic_fetch_add(&workers_ready, 1);
  char byte;
  while (read(never_written[0], &byte, 1) != 0) {}
  return NULL;
}

/* Blocks every signal first, as threads that wait for signals with sigwait do: it cannot answer. */
static void *blocking_worker(void *name) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  return sleeping_worker(name);
}

static void write_thread_list(void) { test_write_thread_list(threads_path); }

static void start_workers(int count, int blocking) {
  static char names[1024][16];
  if (never_written[0] < 0 && pipe(never_written) != 0) exit(1);
  for (int i = 0; i < count && i < 1024; i++) {
    snprintf(names[i], sizeof names[i], blocking && i == 0 ? "blocks-all" : "worker-%d", i + 1);
    pthread_t thread;
    if (pthread_create(&thread, NULL, blocking && i == 0 ? blocking_worker : sleeping_worker, names[i]) != 0) exit(1);
  }
  while (atomic_load(&workers_ready) < count) sched_yield();
  worker_count = count;
}

/* Crashes inside glibc's qsort, in the comparator: the frames between it and the worker are
   glibc's, built without frame pointers. */
static int compare_crashing(const void *a, const void *b) {
  if (*(const int *)a == 7 || *(const int *)b == 7) {
    write_thread_list();
    volatile int *volatile pointer = NULL;
    *pointer = 7;
  }
  return *(const int *)a - *(const int *)b;
}

static void *sorting_worker(void *name) {
  pthread_setname_np(pthread_self(), name);
  int values[16];
  for (int i = 0; i < 16; i++) values[i] = 15 - i;
  wait_until_all_asleep(1);
  qsort(values, 16, sizeof *values, compare_crashing);
  return NULL;
}

static int add_images(void) {
  int index = 0;
  return dl_iterate_phdr(add_image, &index);
}

/* Calls into the library of $CRASH_LIBRARY (crash-threads-lib.c), which crashes three calls deep. */
__attribute__((noinline)) static int call_library(int (*entry)(volatile int *, int)) {
  write_thread_list();
  int result = entry(NULL, 1);
  __asm__ volatile("" ::: "memory");
  return result + 1;
}

static void *library_worker(void *name) {
  pthread_setname_np(pthread_self(), name);
  const char *path = getenv("CRASH_LIBRARY");
  void *handle = path != NULL ? dlopen(path, RTLD_NOW) : NULL;
  int (*entry)(volatile int *, int) = handle != NULL ? (int (*)(volatile int *, int))dlsym(handle, "crash_library_entry") : NULL;
  if (entry == NULL) {
    fprintf(stderr, "cannot load CRASH_LIBRARY: %s\n", dlerror());
    exit(1);
  }
  add_images();  /* the table gains the library */
  wait_until_all_asleep(1);
  call_library(entry);
  return NULL;
}

/* capture: the crash of the "library" mode reached through qsort (its comparator calls the library,
   which crashes three calls deep), beside a thread that blocks every signal and spins and one asleep
   in read(2), all named. */
static atomic_int spinner_started;

static void *spinning_worker(void *name) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  pthread_setname_np(pthread_self(), name);
  atomic_store(&spinner_started, 1);
  for (volatile unsigned long turns = 0;; turns++) {}
  return NULL;
}

static int (*library_entry)(volatile int *, int);

static int compare_into_library(const void *a, const void *b) {
  if (*(const int *)a == 7 || *(const int *)b == 7) call_library(library_entry);
  return *(const int *)a - *(const int *)b;
}

static void *capture_worker(void *name) {
  pthread_setname_np(pthread_self(), name);
  const char *path = getenv("CRASH_LIBRARY");
  void *handle = path != NULL ? dlopen(path, RTLD_NOW) : NULL;
  library_entry = handle != NULL ? (int (*)(volatile int *, int))dlsym(handle, "crash_library_entry") : NULL;
  if (library_entry == NULL) {
    fprintf(stderr, "cannot load CRASH_LIBRARY: %s\n", dlerror());
    exit(1);
  }
  add_images();
  int values[16];
  for (int i = 0; i < 16; i++) values[i] = 15 - i;
  wait_until_all_asleep(1);
  qsort(values, 16, sizeof *values, compare_into_library);
  return NULL;
}

/* twothreads: two threads fault at the same moment (a barrier lets them go together). */
static pthread_barrier_t crash_barrier;

static void *crashing_together(void *unused) {
  (void)unused;
  pthread_barrier_wait(&crash_barrier);
  crash_null_dereference();
  return NULL;
}

static atomic_int children_reaped;

static void reap_children(int signal) {
  (void)signal;
  while (waitpid(-1, NULL, WNOHANG | __WALL) > 0) atomic_fetch_add(&children_reaped, 1);
}

/* bench: the time from the fault to the report written, measured by a handler installed before
   ours, which runs when ours has written the report, restored it and returned. It then hands the
   fault to the handler it displaced: Swift's backtracer when the program is linked with
   libswiftCore (the benchmark's build), which prints its own "Backtrace took". */
static struct timespec bench_start;
static struct sigaction bench_previous;

static void bench_handler(int signal, siginfo_t *info, void *context) {
  struct timespec end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  long long ns = (end.tv_sec - bench_start.tv_sec) * 1000000000LL + (end.tv_nsec - bench_start.tv_nsec);
  char text[64] = "report-ns=";
  char digits[24];
  int n = 0, used = 10;
  do digits[n++] = (char)('0' + ns % 10);
  while ((ns /= 10) > 0);
  while (n > 0) text[used++] = digits[--n];
  text[used++] = '\n';
  write(1, text, (size_t)used);
  if ((bench_previous.sa_flags & SA_SIGINFO) && bench_previous.sa_sigaction != NULL) {
    bench_previous.sa_sigaction(signal, info, context);
    return;
  }
  _exit(0);
}

/* A handler installed before ours: it must run after ours (chaining), with the original siginfo. */
static void previous_handler(int signal, siginfo_t *info, void *context) {
  (void)context;
  char message[] = "previous handler ran: signal NN, address zero: Y\n";
  message[29] = (char)('0' + signal / 10);
  message[30] = (char)('0' + signal % 10);
  message[47] = info->si_addr == NULL ? 'Y' : 'N';
  write(2, message, sizeof message - 1);
  _exit(42);
}

static void copy_maps(const char *to) {
  int in = open("/proc/self/maps", O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char buffer[4096];
  ssize_t n;
  while (in >= 0 && out >= 0 && (n = read(in, buffer, sizeof buffer)) > 0) write(out, buffer, (size_t)n);
  close(in);
  close(out);
}

/* forkhang: the crashed thread, right after it cloned the helper (il_helper_test_after_clone), has a
   second thread fork a child that lives until its parent dies (PR_SET_PDEATHSIG) and so holds copies
   of every pipe the handler made; the crash must end all the same. */
static _Atomic int fork_asked, fork_done;

void il_helper_test_after_clone(long child) {
  (void)child;
  if (!atomic_load(&fork_asked)) return;
  atomic_store(&fork_asked, 2);
  struct timespec delay = {0, 1000000};
  while (!atomic_load(&fork_done)) syscall(SYS_nanosleep, &delay, NULL);
}

static void *forking_thread(void *unused) {
  (void)unused;
  struct timespec delay = {0, 1000000};
  while (atomic_load(&fork_asked) != 2) nanosleep(&delay, NULL);
  pid_t parent = getpid();
  pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    for (;;) pause();
  }
  atomic_store(&fork_done, 1);
  for (;;) nanosleep(&delay, NULL);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: %s MODE REPORT MAPS [THREADS]\n", argv[0]);
    return 64;
  }
  const char *mode = argv[1];
  add_images();
  static char threads_file[4096];
  snprintf(threads_file, sizeof threads_file, "%s.threads", argv[3]);
  threads_path = threads_file;
  if (strcmp(mode, "churn") == 0) return churn();
  if (strcmp(mode, "chained") == 0) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = previous_handler;
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &action, NULL);
  }
  if (strcmp(mode, "bench") == 0) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = bench_handler;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &action, &bench_previous);
  }
  const char *helper = getenv("CRASH_HELPER");
  if (helper != NULL) {
    const char *timeout = getenv("CRASH_HELPER_TIMEOUT_MS");
    int failure = il_crash_set_helper(helper, getenv("CRASH_DIR"), timeout != NULL ? strtoull(timeout, NULL, 10) : 30000);
    if (failure != 0) {
      fprintf(stderr, "%s: cannot set the helper: %d\n", helper, failure);
      return 1;
    }
  }
  const char *sigchld = getenv("CRASH_SIGCHLD");
  if (sigchld != NULL && strcmp(sigchld, "ignore") == 0) signal(SIGCHLD, SIG_IGN);
  if (sigchld != NULL && strcmp(sigchld, "handle") == 0) signal(SIGCHLD, reap_children);
  int fd = helper != NULL && strcmp(argv[2], "-") == 0 ? -1 : il_crash_open_report(argv[2]);
  if (strcmp(mode, "brokenpipe") == 0) {  /* the report goes to a pipe nobody reads */
    int ends[2];
    if (pipe(ends) != 0) return 1;
    close(ends[0]);
    fd = ends[1];
  }
  int error = fd < 0 && helper == NULL ? -1 : il_crash_install(fd);
  if (strcmp(mode, "uninstalled") == 0 && error == 0) error = il_crash_uninstall();
  if (error != 0) {
    fprintf(stderr, "%s: cannot install: %d\n", argv[2], error);
    return 1;
  }
  pthread_t thread;
  if (strcmp(mode, "malloc") == 0) {
    prepare_heap_corruption();
    for (int i = 0; i < 3; i++) pthread_create(&thread, NULL, malloc_loop, NULL);
    while (atomic_load(&malloc_threads_running) < 3) sched_yield();
  }
  copy_maps(argv[3]);
  if (strcmp(mode, "forkhang") == 0) {
    atomic_store(&fork_asked, 1);
    pthread_create(&thread, NULL, forking_thread, NULL);
    crash_null_dereference();
  }
  if (strcmp(mode, "nofile") == 0) {  /* no descriptor left to open at the crash */
    struct rlimit limit = {3, 3};
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return 1;
    crash_null_dereference();
  }
  if (strcmp(mode, "vfork") == 0) {  /* a vfork child crashes before it executes anything, then the parent */
    pid_t child = vfork();
    if (child == 0) crash_null_dereference();
    waitpid(child, NULL, 0);
    crash_null_dereference();
  }
  if (strcmp(mode, "null") == 0 || strcmp(mode, "chained") == 0 || strcmp(mode, "uninstalled") == 0 ||
      strcmp(mode, "brokenpipe") == 0)
    crash_null_dereference();
  else if (strcmp(mode, "abort") == 0) crash_abort();
  else if (strcmp(mode, "stack") == 0) crash_recurse(0);
  else if (strcmp(mode, "divide") == 0) crash_divide();
  else if (strcmp(mode, "breakpoint") == 0) crash_breakpoint();
  else if (strcmp(mode, "callnull") == 0) crash_call_null();
  else if (strcmp(mode, "unloaded") == 0) crash_call_unloaded(0);
  else if (strcmp(mode, "unloaded-thread") == 0) crash_call_unloaded(1);
  else if (strcmp(mode, "timeline") == 0) crash_after_timeline();
  else if (strcmp(mode, "malloc") == 0) crash_corrupt_heap();
  else if (strcmp(mode, "newthreadstack") == 0) {  /* no il_crash_prepare_thread: the interposer gives it a stack */
    pthread_create(&thread, NULL, overflowing_thread, NULL);
    pthread_join(thread, NULL);
  } else if (strcmp(mode, "thread") == 0 || strcmp(mode, "threadstack") == 0) {
    pthread_create(&thread, NULL, strcmp(mode, "thread") == 0 ? second_thread : second_thread_overflow, NULL);
    pthread_join(thread, NULL);
  } else if (strcmp(mode, "qsort") == 0 || strcmp(mode, "library") == 0) {
    start_workers(3, 0);
    pthread_create(&thread, NULL, mode[0] == 'q' ? sorting_worker : library_worker,
                   mode[0] == 'q' ? "sorter" : "library-caller");
    pthread_join(thread, NULL);
  } else if (strcmp(mode, "capture") == 0) {
    start_workers(1, 0);
    pthread_create(&thread, NULL, spinning_worker, "spinner");
    while (!atomic_load(&spinner_started)) sched_yield();
    pthread_create(&thread, NULL, capture_worker, "sorter");
    pthread_join(thread, NULL);
  } else if (strcmp(mode, "twothreads") == 0) {
    pthread_t other;
    pthread_barrier_init(&crash_barrier, NULL, 2);
    pthread_create(&thread, NULL, crashing_together, NULL);
    pthread_create(&other, NULL, crashing_together, NULL);
    pthread_join(thread, NULL);
    pthread_join(other, NULL);
  } else if (strcmp(mode, "mainworkers") == 0 || strcmp(mode, "blocked") == 0) {
    start_workers(3, mode[0] == 'b');
    wait_until_all_asleep(0);
    write_thread_list();
    crash_null_dereference();
  } else if (strcmp(mode, "bench") == 0) {
    /* CRASH_KEEP_UNLOADED: the history's size (il_crash_keep_unloaded); CRASH_PLUGIN opened and closed
       CRASH_CYCLES times first: a report with that many loads and unloads behind it. */
    const char *keep = getenv("CRASH_KEEP_UNLOADED"), *cycles = getenv("CRASH_CYCLES");
    if (keep != NULL && il_crash_keep_unloaded((uint32_t)atoi(keep)) != 0) return 1;
    for (int i = 0, n = cycles != NULL ? atoi(cycles) : 0; i < n; i++) {
      void *handle;
      uint64_t base;
      open_into_table(getenv("CRASH_PLUGIN"), &handle, &base);
      dlclose(handle);
      il_crash_table_remove(base);
    }
    start_workers(argc == 5 ? atoi(argv[4]) - 1 : 3, 0);
    clock_gettime(CLOCK_MONOTONIC, &bench_start);
    crash_null_dereference();
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 64;
  }
  return 0;
}
