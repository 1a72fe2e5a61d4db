/* The image table. Writers (the image observers) keep an authoritative list under a mutex and
   after every change rebuild a flat snapshot (entries + one text arena) into the slot that is not
   published, then publish it with one atomic store. A reader (the crash handler, or
   il_crash_write_binary_images) loads the published index, counts itself in that slot's reader
   count, and checks the index is still published (else it uncounts and tries again, a bounded
   number of times). A writer rebuilds a slot only when its reader count is 0; it waits a little
   for late readers of the old slot and otherwise leaves the change pending for the next update.
   With sequentially consistent atomics a slot is never written while a reader that passed the
   check reads it: a reader whose recheck saw the slot published was counted before the writer
   could have found the slot unpublished and checked its count. The reader never waits for the
   writer, so a crash that interrupts the writer on its own thread reads the last complete
   snapshot at once. The slots' arrays are allocated (and grown) only by the writer, outside
   signal context; capacity is not fixed. */
#define _GNU_SOURCE
#include "crash_internal.h"
#include "CImageLogImageDescription.h"
#include "crash_unloaded.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  uint64_t load_address, text_start, text_end, load_end;
  char *name, *line, *path;
  il_table_layout layout;
  int64_t loaded_ns;
  uint32_t build_id_size;
  uint8_t build_id[IL_UNLOADED_BUILD_ID];
} il_master_entry;

/* The images removed from the table, newest last (crash_unloaded.h): written under table_mutex,
   read at crash time and by the helper. Laid out at the first add (or il_crash_keep_unloaded). */
static il_unloaded_history unloaded_history;
static int unloaded_ready;                 /* guarded by table_mutex */

static pthread_mutex_t table_mutex = PTHREAD_MUTEX_INITIALIZER;
static il_master_entry *master;            /* guarded by table_mutex */
static size_t master_count, master_capacity;
static int master_pending;                 /* a change not yet published (a reader was active) */
static il_table_slot slots[2];
static _Atomic int published_slot = -1;    /* -1: nothing published yet */
static _Atomic int slot_readers[2];

/* Now on CLOCK_REALTIME, il_unloaded_now_ns's clock, through libc's clock_gettime (the vDSO, no
   system call): the table changes on every dlopen and dlclose, never in a signal handler. */
static int64_t wall_clock_ns(void) {
  struct timespec now = {0, 0};
  clock_gettime(CLOCK_REALTIME, &now);
  return (int64_t)now.tv_sec * 1000000000 + (int64_t)now.tv_nsec;
}

/* Rebuilds the unpublished slot from `master` and publishes it. Called with table_mutex held. */
static int publish_locked(void) {
  int current = atomic_load(&published_slot);
  int target = current == 0 ? 1 : 0;
  /* Readers of the unpublished slot started before the last publish and finish soon; never wait
     long: a crash handler that reads it may never return. */
  for (int i = 0; atomic_load(&slot_readers[target]) != 0; i++) {
    if (i == 1000) {
      master_pending = 1;
      return 0;
    }
    sched_yield();
  }
  il_table_slot *slot = &slots[target];
  size_t text_needed = 0;
  for (size_t i = 0; i < master_count; i++)
    text_needed += strlen(master[i].name) + strlen(master[i].line);
  if (slot->capacity < master_count) {
    size_t capacity = master_count < 64 ? 64 : master_count * 2;
    il_table_entry *entries = malloc(capacity * sizeof *entries);
    if (entries == NULL) {
      master_pending = 1;  /* the published table stays whole; the next update retries */
      return -1;
    }
    free(slot->entries);
    slot->entries = entries;
    slot->capacity = capacity;
  }
  if (slot->text_capacity < text_needed || slot->text == NULL) {
    size_t capacity = text_needed < 16384 ? 16384 : text_needed * 2;
    char *text = malloc(capacity);
    if (text == NULL) {
      master_pending = 1;
      return -1;
    }
    free(slot->text);
    slot->text = text;
    slot->text_capacity = capacity;
  }
  size_t used = 0;
  for (size_t i = 0; i < master_count; i++) {
    il_table_entry *entry = &slot->entries[i];
    size_t name_length = strlen(master[i].name), line_length = strlen(master[i].line);
    entry->load_address = master[i].load_address;
    entry->text_start = master[i].text_start;
    entry->text_end = master[i].text_end;
    entry->layout = master[i].layout;
    entry->name_offset = (uint32_t)used;
    entry->name_length = (uint32_t)name_length;
    memcpy(slot->text + used, master[i].name, name_length);
    used += name_length;
    entry->line_offset = (uint32_t)used;
    entry->line_length = (uint32_t)line_length;
    memcpy(slot->text + used, master[i].line, line_length);
    used += line_length;
  }
  slot->count = master_count;
  slot->text_used = used;
  atomic_store(&published_slot, (int)(slot - slots));
  master_pending = 0;
  return 0;
}

typedef struct {
  uint64_t load_address;
  il_table_layout *layout;
} il_layout_search;

/* dl_iterate_phdr callback: the object one of whose PT_LOADs starts (page-aligned) at or holds the
   load address. */
static int find_layout(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size;
  il_layout_search *search = context;
  int found = 0;
  for (int i = 0; i < info->dlpi_phnum && !found; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uint64_t start = (uint64_t)info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
    uint64_t page_start = start & ~(uint64_t)4095;
    found = search->load_address >= page_start && search->load_address < end;
  }
  if (!found) return 0;
  il_table_layout *layout = search->layout;
  layout->load_bias = (uint64_t)info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uint64_t start = (uint64_t)info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_GNU_EH_FRAME) layout->eh_frame_hdr = start;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && ph->p_memsz > 0 && layout->segment_count < IL_SEGMENTS) {
      layout->segments[layout->segment_count][0] = start;
      layout->segments[layout->segment_count][1] = start + ph->p_memsz;
      layout->segment_count++;
    }
  }
  return 1;
}

/* The loaded object's segments and PT_GNU_EH_FRAME; all zero for an address no object holds (the
   tests' fake images). */
static il_table_layout image_layout(uint64_t load_address) {
  il_table_layout layout;
  memset(&layout, 0, sizeof layout);
  il_layout_search search = {load_address, &layout};
  dl_iterate_phdr(find_layout, &search);
  return layout;
}

int il_crash_table_add(uint64_t load_address, uint64_t text_start, uint64_t text_end,
                       const char *name, const char *line) {
  return il_crash_table_add_image(load_address, text_end, text_start, text_end, name, line, name, NULL, 0);
}

int il_crash_keep_unloaded(uint32_t count) {
  if (count > IL_UNLOADED_MAX) return EINVAL;
  pthread_mutex_lock(&table_mutex);
  il_unloaded_init(&unloaded_history, count);
  unloaded_ready = 1;
  pthread_mutex_unlock(&table_mutex);
  return 0;
}

void il_crash_table_start_timeline(void) {
  pthread_mutex_lock(&table_mutex);
  if (!unloaded_ready) {
    il_unloaded_init(&unloaded_history, IL_UNLOADED_DEFAULT);
    unloaded_ready = 1;
  }
  il_unloaded_start(&unloaded_history);
  pthread_mutex_unlock(&table_mutex);
}

const il_unloaded_history *il_crash_unloaded_history(void) {
  return __atomic_load_n(&unloaded_history.capacity, __ATOMIC_SEQ_CST) != 0 ? &unloaded_history : NULL;
}

int il_crash_table_add_image(uint64_t load_address, uint64_t load_end, uint64_t text_start, uint64_t text_end,
                             const char *name, const char *line, const char *path, const uint8_t *build_id,
                             size_t build_id_size) {
  if (name == NULL || line == NULL || path == NULL || text_end < text_start || load_end < load_address ||
      strlen(name) > 4096 || strlen(line) > 8192 || strlen(path) > 4096 || strchr(line, '\n') != NULL ||
      (build_id == NULL && build_id_size != 0)) {
    errno = EINVAL;
    return -1;
  }
  char *name_copy = strdup(name), *line_copy = strdup(line), *path_copy = strdup(path);
  if (name_copy == NULL || line_copy == NULL || path_copy == NULL) {
    free(name_copy);
    free(line_copy);
    free(path_copy);
    errno = ENOMEM;
    return -1;
  }
  il_master_entry added = {load_address, text_start, text_end, load_end, name_copy, line_copy, path_copy,
                           {0}, wall_clock_ns(), 0, {0}};
  added.build_id_size = (uint32_t)(build_id_size < IL_UNLOADED_BUILD_ID ? build_id_size : IL_UNLOADED_BUILD_ID);
  if (added.build_id_size != 0) memcpy(added.build_id, build_id, added.build_id_size);
  added.layout = image_layout(load_address);  /* before the lock: dl_iterate_phdr takes the loader's */
  pthread_mutex_lock(&table_mutex);
  if (!unloaded_ready) {
    il_unloaded_init(&unloaded_history, IL_UNLOADED_DEFAULT);
    unloaded_ready = 1;
  }
  size_t index = master_count;
  for (size_t i = 0; i < master_count; i++)
    if (master[i].load_address == load_address) index = i;
  int is_new = index == master_count;
  if (index == master_count) {
    if (master_count == master_capacity) {
      size_t capacity = master_capacity == 0 ? 64 : master_capacity * 2;
      il_master_entry *grown = realloc(master, capacity * sizeof *grown);
      if (grown == NULL) {
        pthread_mutex_unlock(&table_mutex);
        free(name_copy);
        free(line_copy);
        free(path_copy);
        errno = ENOMEM;
        return -1;
      }
      master = grown;
      master_capacity = capacity;
    }
    master_count++;
  } else {
    free(master[index].name);
    free(master[index].line);
    free(master[index].path);
  }
  /* A new image (not one added again at its address) is a load in the report's timeline. */
  if (is_new) il_unloaded_record_load(&unloaded_history, load_address, added.loaded_ns, path_copy);
  master[index] = added;
  int result = publish_locked();
  pthread_mutex_unlock(&table_mutex);
  if (result != 0) errno = ENOMEM;
  return result;
}

int il_crash_table_remove(uint64_t load_address) {
  int removed = 0;
  pthread_mutex_lock(&table_mutex);
  for (size_t i = 0; i < master_count; i++) {
    if (master[i].load_address != load_address) continue;
    /* Kept before the table forgets it: a crash in its code after this finds it there. */
    il_unloaded_record(&unloaded_history, master[i].load_address, master[i].load_end - master[i].load_address,
                       master[i].layout.load_bias, master[i].loaded_ns, wall_clock_ns(), master[i].build_id, master[i].build_id_size,
                       master[i].path);
    free(master[i].name);
    free(master[i].line);
    free(master[i].path);
    memmove(&master[i], &master[i + 1], (master_count - i - 1) * sizeof *master);
    master_count--;
    removed = 1;
    break;
  }
  if (removed || master_pending) publish_locked();
  pthread_mutex_unlock(&table_mutex);
  return removed;
}

/* Reader side: async-signal-safe, never waits. Returns the slot to read (NULL when nothing was
   ever published) and the index to pass to il_crash_table_release. */
const il_table_slot *il_crash_table_acquire(int *held) {
  for (int attempt = 0;; attempt++) {
    int index = atomic_load(&published_slot);
    if (index < 0) {
      *held = -1;
      return NULL;
    }
    atomic_fetch_add(&slot_readers[index], 1);
    /* Still published: the writer cannot have started rebuilding it. */
    if (atomic_load(&published_slot) == index) {
      *held = index;
      return &slots[index];
    }
    atomic_fetch_sub(&slot_readers[index], 1);
    /* 64 lost races with a writer publishing again and again (never seen): no table rather
       than a spin or a slot being rebuilt. */
    if (attempt == 64) {
      *held = -1;
      return NULL;
    }
  }
}

void il_crash_table_release(int held) {
  if (held >= 0) atomic_fetch_sub(&slot_readers[held], 1);
}

const il_table_entry *il_crash_table_lookup(const il_table_slot *slot, uint64_t address) {
  if (slot == NULL) return NULL;
  for (size_t i = 0; i < slot->count; i++)
    if (address >= slot->entries[i].text_start && address < slot->entries[i].text_end)
      return &slot->entries[i];
  return NULL;
}

size_t il_crash_table_count(void) {
  int held;
  const il_table_slot *slot = il_crash_table_acquire(&held);
  size_t count = slot == NULL ? 0 : slot->count;
  il_crash_table_release(held);
  return count;
}

/* ---- Binary Images and Unloaded Images ---- */

void il_crash_write_unloaded(il_writer *w, int64_t crash_ns) {
  const il_unloaded_history *history = il_crash_unloaded_history();
  if (history == NULL) return;
  il_unloaded_entry entry;
  int any = 0;
  char text[IL_UNLOADED_PATH * 8 + 512];
  for (uint32_t age = 0; age < IL_UNLOADED_MAX; age++) {
    if (!il_unloaded_get(history, age, &entry)) continue;
    if (!any) w_str(w, "\nUnloaded Images:\n");
    any = 1;
    il_line line = {text, sizeof text, 0, 0};
    w_bytes(w, text, il_unloaded_line(&line, &entry, crash_ns, il_native_architecture()));
    w_bytes(w, "\n", 1);
  }
}

void il_crash_write_timeline(il_writer *w, int64_t crash_ns) {
  const il_unloaded_history *history = il_crash_unloaded_history();
  if (history == NULL) return;
  il_image_event event;
  int any = 0;
  char text[IL_EVENT_NAME * 4 + 128];
  for (uint32_t age = IL_EVENTS_MAX; age-- > 0;) {
    if (!il_unloaded_get_event(history, age, &event)) continue;
    if (!any) w_str(w, "\nImage Timeline:\n");
    any = 1;
    il_line line = {text, sizeof text, 0, 0};
    w_bytes(w, text, il_unloaded_event_line(&line, &event, crash_ns));
    w_bytes(w, "\n", 1);
  }
}

void il_crash_write_table(il_writer *w, const il_table_slot *slot) {
  if (slot == NULL) return;
  for (size_t i = 0; i < slot->count; i++) {
    w_bytes(w, slot->text + slot->entries[i].line_offset, slot->entries[i].line_length);
    w_bytes(w, "\n", 1);
  }
}

ssize_t il_crash_write_binary_images(int fd) {
  int saved_errno = errno;
  il_writer w = {.fd = fd};
  int held;
  const il_table_slot *slot = il_crash_table_acquire(&held);
  il_crash_write_table(&w, slot);
  il_crash_table_release(held);
  w_flush(&w);
  if (w.failed) {
    errno = w.failed;
    return -1;
  }
  errno = saved_errno;
  return w.total;
}
