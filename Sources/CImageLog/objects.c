#define _GNU_SOURCE
#include "CImageLog.h"
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

static void il_fill_object(il_object *object, const struct dl_phdr_info *info, size_t size) {
  object->load_bias = (uintptr_t)info->dlpi_addr;
  object->name = info->dlpi_name ? info->dlpi_name : "";
  object->phdrs = info->dlpi_phdr;
  object->phnum = info->dlpi_phnum;
  /* dlpi_adds/dlpi_subs exist since glibc 2.4; the size check is what dl_iterate_phdr(3) asks for. */
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    object->adds = info->dlpi_adds;
    object->subs = info->dlpi_subs;
  }
  object->name_length = strlen(object->name);
}

/* The walk behind the observers and snapshot(): an object that is the one expected next costs one
   comparison here instead of a call into Swift (a dlopen/dlclose cycle walks the whole list twice). */
struct il_matching_walk {
  il_walk *walk;
  int (*visit)(const il_object *, il_walk *, void *);
  void *context;
};

/* An object that is not the one expected at the cursor: filled in and handed to the Swift side. Kept
   out of line so the common case below (the expected object: one comparison) stays a leaf function
   without a stack frame. */
__attribute__((noinline)) static int il_visit_other(struct dl_phdr_info *info, size_t size,
                                                    struct il_matching_walk *matching) {
  il_object object = {0};
  il_fill_object(&object, info, size);
  return matching->visit(&object, matching->walk, matching->context);
}

static int il_walk_one(struct dl_phdr_info *info, size_t size, void *data) {
  struct il_matching_walk *matching = data;
  il_walk *walk = matching->walk;
  if (walk->index == 0) {
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
      walk->adds = info->dlpi_adds;
      walk->subs = info->dlpi_subs;
    }
    if (walk->stop_if_unchanged && walk->adds == walk->known_adds && walk->subs == walk->known_subs) {
      walk->unchanged = 1;
      return 1;
    }
  }
  int result = 0;
  if (walk->match_keys && walk->cursor < walk->key_count &&
      walk->keys[walk->cursor].load_bias == (uintptr_t)info->dlpi_addr &&
      walk->keys[walk->cursor].phdrs == (const void *)info->dlpi_phdr) {
    walk->cursor++;
  } else {
    result = il_visit_other(info, size, matching);
  }
  walk->index++;
  return result;
}

int il_walk_objects(il_walk *walk, int (*visit)(const il_object *object, il_walk *walk, void *context),
                    void *context) {
  struct il_matching_walk matching = { walk, visit, context };
  walk->index = 0;
  walk->unchanged = 0;
  walk->adds = 0;
  walk->subs = 0;
  return dl_iterate_phdr(il_walk_one, &matching);
}

/* The program headers are the loader's own: it mapped the object by these very entries, and they
   are read with <link.h>'s types, as dl_iterate_phdr(3) callers do. The arithmetic is the audit
   module's too (CImageLogImage.h). (Note contents, which the loader never checks, are left to the
   bounds-checked reader on the Swift side.) */
int il_object_layout(const il_object *object, uint64_t page_size, il_layout *layout) {
  return il_image_layout(object->phdrs, object->phnum, (uint64_t)object->load_bias, page_size, layout);
}

int il_object_next_note(const il_object *object, uint16_t *index, il_note_area *note) {
  size_t position = *index;
  int found = il_image_next_note(object->phdrs, object->phnum, (uint64_t)object->load_bias, &position, note);
  *index = (uint16_t)position;  /* position <= phnum, a uint16_t */
  return found;
}

static int il_first_counters(struct dl_phdr_info *info, size_t size, void *data) {
  uint64_t *counters = data;
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    counters[0] = info->dlpi_adds;
    counters[1] = info->dlpi_subs;
  }
  return 1;
}

void il_loader_counters(uint64_t *adds, uint64_t *subs) {
  uint64_t counters[2] = {0, 0};
  dl_iterate_phdr(il_first_counters, counters);
  *adds = counters[0];
  *subs = counters[1];
}

int il_lookup_address(uint64_t address, il_symbol_info *info) {
  Dl_info dl = {0};
  if (!dladdr((const void *)(uintptr_t)address, &dl)) return 0;
  info->file_name = dl.dli_fname;
  info->file_base = (uint64_t)(uintptr_t)dl.dli_fbase;
  info->symbol_name = dl.dli_sname;
  info->symbol_address = (uint64_t)(uintptr_t)dl.dli_saddr;
  return 1;
}
