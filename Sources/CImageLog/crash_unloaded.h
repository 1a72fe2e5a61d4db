#ifndef CIMAGELOG_UNLOADED_H
#define CIMAGELOG_UNLOADED_H
/* The images a process removed (dlclose), kept where its crash can read them: a ring of the last N
   removed images, in static memory laid out once (no allocation, ever), written by whoever sees an
   image go (the library's image table, crash_table.c; the audit module's la_objclose) and read at a
   crash, in process by the report writers (async-signal-safe: no lock, no allocation, bounded) and
   from outside by imagelog's capture helper, which reads the ring with process_vm_readv at the address
   the crash record gives (CrashRecord.swift decodes it field by field). Header-only and libc-free: the
   audit module links no libc.

   One writer at a time (the table's mutex; the loader's lock around la_objclose). Each entry carries a
   sequence number, odd while the entry is written and even (never 0) once complete: a reader copies an
   entry and keeps the copy only when the number was the same even value before and after, so a crash
   that interrupts the writer, or a helper reading while another thread writes, never sees half of one.

   Layout (native byte order: x86_64 and aarch64 are little-endian), header 64 bytes:
      0  magic "ILUNLOAD"        16  u32 entry size (512)     24  u64 written (unloads ever recorded)
      8  u32 version (2)         20  u32 capacity (N, at most IL_UNLOADED_MAX)
     12  u32 header size (64)    32  u32 event capacity (2N, at most IL_EVENTS_MAX)  36 u32 event size (128)
     40  u64 events written      48  16 bytes 0
   then IL_UNLOADED_MAX entries of 512 bytes, the first N in use; entry (written - 1) % N is the newest:
      0  u64 sequence            40  i64 unloaded, ns since the epoch (CLOCK_REALTIME)
      8  u64 base (the lowest mapped address)  48  i32 the thread that unloaded it
     16  u64 size (bytes mapped from base)     52  u32 build-id size (at most 64)
     24  u64 load bias           56  u8 build-id[64]
     32  i64 loaded, ns since the epoch (0: unknown)   120 u32 path length  124 u32 flags (1: path cut)
    128  path[384], not NUL-terminated
   then, at 64 + IL_UNLOADED_MAX * 512, IL_EVENTS_MAX events of 128 bytes (the report's Image Timeline:
   the loads since the program started, il_unloaded_start, and every unload, in order), the first 2N in
   use, event (events written - 1) % 2N the newest, each with a sequence number as the entries':
      0  u64 sequence            24  i64 loaded, ns (an unload's load time; 0: unknown)
      8  i64 time, ns since the epoch (CLOCK_REALTIME)     32  i32 thread   36  u32 kind (1 load, 2 unload)
     16  u64 base                40  u32 name length   44  u32 flags (1: name cut)   48  name[80] (the
   path's last part, not NUL-terminated) */
#include "CImageLogCrashHelper.h"
#include "CImageLogImageLine.h"

enum {
  IL_UNLOADED_MAX = 64,
  IL_UNLOADED_DEFAULT = 16,
  IL_UNLOADED_VERSION = 2,
  IL_EVENTS_MAX = 2 * IL_UNLOADED_MAX,
  IL_EVENT_NAME = 80,
  IL_EVENT_LOADED = 1,
  IL_EVENT_UNLOADED = 2,
  IL_UNLOADED_BUILD_ID = 64,
  IL_UNLOADED_PATH = 384,
  IL_UNLOADED_PATH_CUT = 1,
};

typedef struct {
  uint64_t sequence;
  uint64_t base, size, load_bias;
  int64_t loaded_ns, unloaded_ns;
  int32_t tid;
  uint32_t build_id_size;
  uint8_t build_id[IL_UNLOADED_BUILD_ID];
  uint32_t path_length, flags;
  char path[IL_UNLOADED_PATH];
} il_unloaded_entry;

typedef struct {
  uint64_t sequence;
  int64_t time_ns;
  uint64_t base;
  int64_t loaded_ns;
  int32_t tid;
  uint32_t kind, name_length, flags;
  char name[IL_EVENT_NAME];
} il_image_event;

typedef struct {
  char magic[8];
  uint32_t version, header_size, entry_size, capacity;
  uint64_t written;
  uint32_t event_capacity, event_size;
  uint64_t events_written;
  uint64_t reserved[2];
  il_unloaded_entry entries[IL_UNLOADED_MAX];
  il_image_event events[IL_EVENTS_MAX];
  int loads_recorded;  /* not part of the layout others read: set by il_unloaded_start */
} il_unloaded_history;

_Static_assert(sizeof(il_unloaded_entry) == 512, "the entry's layout is CrashRecord.swift's");
_Static_assert(offsetof(il_unloaded_entry, path) == 128, "the entry's layout is CrashRecord.swift's");
_Static_assert(offsetof(il_unloaded_history, entries) == 64, "the header's layout is CrashRecord.swift's");
_Static_assert(sizeof(il_image_event) == 128, "the event's layout is CrashRecord.swift's");
_Static_assert(offsetof(il_unloaded_history, events) == 64 + IL_UNLOADED_MAX * 512, "CrashRecord.swift's layout");

/* Lays out `history` to keep the last `capacity` removed images (clamped to 1...IL_UNLOADED_MAX; 0
   keeps none). Forgets what it held. Not to be called while another thread records. */
static inline void il_unloaded_init(il_unloaded_history *history, uint32_t capacity) {
  static const char magic[8] = {'I', 'L', 'U', 'N', 'L', 'O', 'A', 'D'};
  if (capacity > IL_UNLOADED_MAX) capacity = IL_UNLOADED_MAX;
  __atomic_store_n(&history->capacity, 0, __ATOMIC_SEQ_CST);
  for (int i = 0; i < 8; i++) history->magic[i] = magic[i];
  history->version = IL_UNLOADED_VERSION;
  history->header_size = (uint32_t)offsetof(il_unloaded_history, entries);
  history->entry_size = (uint32_t)sizeof(il_unloaded_entry);
  for (int i = 0; i < IL_UNLOADED_MAX; i++) __atomic_store_n(&history->entries[i].sequence, 0, __ATOMIC_SEQ_CST);
  history->event_size = (uint32_t)sizeof(il_image_event);
  __atomic_store_n(&history->event_capacity, 0, __ATOMIC_SEQ_CST);
  for (int i = 0; i < IL_EVENTS_MAX; i++) __atomic_store_n(&history->events[i].sequence, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&history->events_written, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&history->written, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&history->event_capacity, 2 * capacity, __ATOMIC_SEQ_CST);
  __atomic_store_n(&history->capacity, capacity, __ATOMIC_SEQ_CST);
}

/* From now on loads are recorded as events too: the images loaded before (the program's startup set)
   stay out of the timeline, which stays short. Called once the startup set is known (the crash
   handler installed; the audit module's la_preinit). */
static inline void il_unloaded_start(il_unloaded_history *history) {
  __atomic_store_n(&history->loads_recorded, 1, __ATOMIC_SEQ_CST);
}

/* Records one event (the caller's thread, one writer at a time, as il_unloaded_record). */
static inline void il_unloaded_event(il_unloaded_history *history, uint32_t kind, uint64_t base, int64_t time_ns,
                                     int64_t loaded_ns, const char *path) {
  uint32_t capacity = __atomic_load_n(&history->event_capacity, __ATOMIC_SEQ_CST);
  if (capacity == 0) return;
  uint64_t written = __atomic_load_n(&history->events_written, __ATOMIC_SEQ_CST);
  il_image_event *event = &history->events[written % capacity];
  uint64_t sequence = (written + 1) * 2;
  __atomic_store_n(&event->sequence, sequence - 1, __ATOMIC_SEQ_CST);
  event->time_ns = time_ns;
  event->base = base;
  event->loaded_ns = loaded_ns;
  event->tid = (int32_t)IL_SYS(SYS_gettid, 0);
  event->kind = kind;
  size_t path_length = 0;
  while (path != NULL && path[path_length] != '\0') path_length++;
  const char *name = path != NULL ? il_image_name(path, path_length) : "";
  size_t length = 0;
  while (name[length] != '\0' && length < IL_EVENT_NAME) {
    event->name[length] = name[length];
    length++;
  }
  event->name_length = (uint32_t)length;
  event->flags = name[length] != '\0' ? IL_UNLOADED_PATH_CUT : 0;
  __atomic_store_n(&event->sequence, sequence, __ATOMIC_SEQ_CST);
  __atomic_store_n(&history->events_written, written + 1, __ATOMIC_SEQ_CST);
}

/* Records an image added at `loaded_ns`, once il_unloaded_start was called. */
static inline void il_unloaded_record_load(il_unloaded_history *history, uint64_t base, int64_t loaded_ns,
                                           const char *path) {
  if (__atomic_load_n(&history->loads_recorded, __ATOMIC_SEQ_CST))
    il_unloaded_event(history, IL_EVENT_LOADED, base, loaded_ns, 0, path);
}

/* Now, in nanoseconds since the epoch (CLOCK_REALTIME): the clock of the entries' times and the
   record's crash time. */
static inline int64_t il_unloaded_now_ns(void) {
  struct timespec now = {0, 0};
  IL_SYS(SYS_clock_gettime, CLOCK_REALTIME, &now);
  return (int64_t)now.tv_sec * 1000000000 + (int64_t)now.tv_nsec;
}

/* Copies the `size` bytes of an entry or event whose sequence number is `*sequence` into `to`: 1 when
   the number was the same even value (not 0) before and after, so the copy is whole; else 0. */
static inline int il_unloaded_copy(const uint64_t *sequence, const void *from, void *to, size_t size) {
  uint64_t before = __atomic_load_n(sequence, __ATOMIC_SEQ_CST);
  if (before == 0 || (before & 1) != 0) return 0;
  for (size_t i = 0; i < size; i++) ((unsigned char *)to)[i] = ((const unsigned char *)from)[i];
  return __atomic_load_n(sequence, __ATOMIC_SEQ_CST) == before;
}

/* Records one removed image (its path cut at IL_UNLOADED_PATH bytes, its build-id at
   IL_UNLOADED_BUILD_ID), unloaded at `unloaded_ns` (CLOCK_REALTIME, as il_unloaded_now_ns; the caller
   reads the clock its own cheapest way) by the calling thread. One writer at a time. */
static inline void il_unloaded_record(il_unloaded_history *history, uint64_t base, uint64_t size, uint64_t load_bias,
                                      int64_t loaded_ns, int64_t unloaded_ns, const uint8_t *build_id,
                                      size_t build_id_size, const char *path) {
  uint32_t capacity = __atomic_load_n(&history->capacity, __ATOMIC_SEQ_CST);
  if (capacity == 0) return;
  uint64_t written = __atomic_load_n(&history->written, __ATOMIC_SEQ_CST);
  il_unloaded_entry *entry = &history->entries[written % capacity];
  uint64_t sequence = (written + 1) * 2;
  __atomic_store_n(&entry->sequence, sequence - 1, __ATOMIC_SEQ_CST);
  entry->base = base;
  entry->size = size;
  entry->load_bias = load_bias;
  entry->loaded_ns = loaded_ns;
  entry->unloaded_ns = unloaded_ns;
  entry->tid = (int32_t)IL_SYS(SYS_gettid, 0);
  if (build_id == NULL || build_id_size > IL_UNLOADED_BUILD_ID) build_id_size = build_id == NULL ? 0 : IL_UNLOADED_BUILD_ID;
  for (size_t i = 0; i < build_id_size; i++) entry->build_id[i] = build_id[i];
  entry->build_id_size = (uint32_t)build_id_size;
  size_t length = 0;
  while (path != NULL && path[length] != '\0' && length < IL_UNLOADED_PATH) {
    entry->path[length] = path[length];
    length++;
  }
  entry->path_length = (uint32_t)length;
  entry->flags = path != NULL && path[length] != '\0' ? IL_UNLOADED_PATH_CUT : 0;
  __atomic_store_n(&entry->sequence, sequence, __ATOMIC_SEQ_CST);
  __atomic_store_n(&history->written, written + 1, __ATOMIC_SEQ_CST);
  il_unloaded_event(history, IL_EVENT_UNLOADED, base, unloaded_ns, loaded_ns, path);
}

/* The `age`-th newest event (0 the newest) copied into `out`: 1, or 0 when there is none that old or
   it is being written. Async-signal-safe, never waits. */
static inline int il_unloaded_get_event(const il_unloaded_history *history, uint32_t age, il_image_event *out) {
  uint32_t capacity = __atomic_load_n(&history->event_capacity, __ATOMIC_SEQ_CST);
  uint64_t written = __atomic_load_n(&history->events_written, __ATOMIC_SEQ_CST);
  if (capacity == 0 || capacity > IL_EVENTS_MAX || age >= capacity || age >= written) return 0;
  const il_image_event *event = &history->events[(written - 1 - age) % capacity];
  return il_unloaded_copy(&event->sequence, event, out, sizeof *event) && out->name_length <= IL_EVENT_NAME;
}

/* The event's Image Timeline line (no newline), its time relative to the crash:
   "-3.200 ms  unloaded libplugin.so at 0x7f0000000000 (loaded for 12.000 ms) by thread 4" or
   "-15.200 ms  loaded libplugin.so at 0x7f0000000000 by thread 4" ("+" for an event after the crash
   time, another thread's). ProcessSnapshot's imagelogReportText writes the same bytes. */
static inline size_t il_unloaded_event_line(il_line *line, const il_image_event *event, int64_t crash_ns) {
  if (event->time_ns <= crash_ns) {
    il_line_char(line, '-');
    il_line_milliseconds(line, (uint64_t)(crash_ns - event->time_ns));
  } else {
    il_line_char(line, '+');
    il_line_milliseconds(line, (uint64_t)(event->time_ns - crash_ns));
  }
  il_line_text(line, " ms  ");
  il_line_text(line, event->kind == IL_EVENT_LOADED ? "loaded " : "unloaded ");
  il_line_escaped(line, event->name, event->name_length);
  il_line_text(line, " at ");
  il_line_address(line, event->base);
  if (event->kind == IL_EVENT_UNLOADED && event->loaded_ns != 0 && event->time_ns >= event->loaded_ns) {
    il_line_text(line, " (loaded for ");
    il_line_milliseconds(line, (uint64_t)(event->time_ns - event->loaded_ns));
    il_line_text(line, " ms)");
  }
  il_line_text(line, " by thread ");
  il_line_decimal(line, (uint64_t)(uint32_t)event->tid);
  return line->used;
}

/* The `age`-th newest removed image (0 the newest) copied into `out`: 1, or 0 when there is none that
   old or it is being written. Async-signal-safe, never waits. */
static inline int il_unloaded_get(const il_unloaded_history *history, uint32_t age, il_unloaded_entry *out) {
  uint32_t capacity = __atomic_load_n(&history->capacity, __ATOMIC_SEQ_CST);
  uint64_t written = __atomic_load_n(&history->written, __ATOMIC_SEQ_CST);
  if (capacity == 0 || age >= capacity || age >= written) return 0;
  const il_unloaded_entry *entry = &history->entries[(written - 1 - age) % capacity];
  return il_unloaded_copy(&entry->sequence, entry, out, sizeof *entry) && out->path_length <= IL_UNLOADED_PATH &&
         out->build_id_size <= IL_UNLOADED_BUILD_ID;
}

/* The newest removed image whose mapped range held `address`, into `out`: 1, or 0. Each entry's range
   is looked at first and only an entry that holds `address` is copied (and checked whole): a report
   looks up every frame, and copying every entry for each was a measurable share of the crash handler's
   time with a full history (BENCHMARKS.md, "Crash report with the image history"). */
static inline int il_unloaded_lookup(const il_unloaded_history *history, uint64_t address, il_unloaded_entry *out) {
  uint32_t capacity = __atomic_load_n(&history->capacity, __ATOMIC_SEQ_CST);
  uint64_t written = __atomic_load_n(&history->written, __ATOMIC_SEQ_CST);
  for (uint32_t age = 0; age < IL_UNLOADED_MAX && age < capacity && age < written; age++) {
    const il_unloaded_entry *entry = &history->entries[(written - 1 - age) % capacity];
    uint64_t base = __atomic_load_n(&entry->base, __ATOMIC_RELAXED), size = __atomic_load_n(&entry->size, __ATOMIC_RELAXED);
    if (address < base || address - base >= size) continue;  /* a torn range: il_unloaded_get decides */
    if (il_unloaded_get(history, age, out) && address >= out->base && address - out->base < out->size) return 1;
  }
  return 0;
}

/* "unloaded T ms before the crash by thread N": when the entry's image went, as of `crash_ns`. */
static inline void il_unloaded_when(il_line *line, const il_unloaded_entry *entry, int64_t crash_ns) {
  il_line_text(line, "unloaded ");
  il_line_milliseconds(line, crash_ns > entry->unloaded_ns ? (uint64_t)(crash_ns - entry->unloaded_ns) : 0);
  il_line_text(line, " ms before the crash by thread ");
  il_line_decimal(line, (uint64_t)(uint32_t)entry->tid);
}

/* The entry's name (its path's last part), escaped as the Binary Images lines escape names: the name
   column of a frame in the image. */
static inline size_t il_unloaded_name(il_line *line, const il_unloaded_entry *entry) {
  const char *name = il_image_name(entry->path, entry->path_length);
  il_line_escaped(line, name, entry->path_length - (size_t)(name - entry->path));
  return line->used;
}

/* The note of a frame in a mapped image (`name`, loaded at `base`) where the removed image `entry` had
   been: "libplugin.so was here, unloaded 3.200 ms before the crash by thread 4". 0 (nothing written)
   when `entry` is that image itself loaded again: the same name at the same address. */
static inline int il_unloaded_was_here(il_line *line, const il_unloaded_entry *entry, const char *name,
                                       size_t name_length, uint64_t base, int64_t crash_ns) {
  const char *gone = il_image_name(entry->path, entry->path_length);
  size_t gone_length = entry->path_length - (size_t)(gone - entry->path);
  int same = entry->base == base && gone_length == name_length;
  for (size_t i = 0; same && i < name_length; i++) same = gone[i] == name[i];
  if (same) return 0;
  il_line_escaped(line, gone, gone_length);
  il_line_text(line, " was here, ");
  il_unloaded_when(line, entry, crash_ns);
  return 1;
}

/* The entry's Unloaded Images line (no newline), the Binary Images `crash` line of the image with its
   whole build-id, then when it went and how long it had been loaded:
   "0xBASE - 0xLAST NAME ARCH  <BUILDID> PATH  unloaded 3.200 ms before the crash by thread 4, loaded
   for 10.000 ms" (", loaded for" left out when the load time is unknown). ProcessSnapshot's
   imagelogReportText writes the same bytes. */
static inline size_t il_unloaded_line(il_line *line, const il_unloaded_entry *entry, int64_t crash_ns,
                                      const char *architecture) {
  const char *name = il_image_name(entry->path, entry->path_length);
  il_line_address(line, entry->base);
  il_line_text(line, " - ");
  il_line_address(line, entry->size == 0 ? entry->base : entry->base + entry->size - 1);
  il_line_char(line, ' ');
  il_line_escaped(line, name, entry->path_length - (size_t)(name - entry->path));
  il_line_char(line, ' ');
  il_line_text(line, architecture);
  il_line_text(line, "  <");
  il_line_bytes(line, entry->build_id, entry->build_id_size, 0, 0);
  il_line_text(line, "> ");
  il_line_escaped(line, entry->path, entry->path_length);
  il_line_text(line, "  ");
  il_unloaded_when(line, entry, crash_ns);
  if (entry->loaded_ns != 0 && entry->unloaded_ns >= entry->loaded_ns) {
    il_line_text(line, ", loaded for ");
    il_line_milliseconds(line, (uint64_t)(entry->unloaded_ns - entry->loaded_ns));
    il_line_text(line, " ms");
  }
  return line->used;
}
#endif
