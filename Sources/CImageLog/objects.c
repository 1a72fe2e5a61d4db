#define _GNU_SOURCE
#include "CImageLog.h"
#include <dlfcn.h>
#include <link.h>
#include <sys/auxv.h>

struct il_walk {
  int (*visit)(const il_object *, void *);
  void *context;
};

static int il_walk_one(struct dl_phdr_info *info, size_t size, void *data) {
  struct il_walk *walk = data;
  il_object object = {0};
  object.load_bias = (uintptr_t)info->dlpi_addr;
  object.name = info->dlpi_name ? info->dlpi_name : "";
  object.phdrs = info->dlpi_phdr;
  object.phnum = info->dlpi_phnum;
  /* dlpi_adds/dlpi_subs exist since glibc 2.4; the size check is what dl_iterate_phdr(3) asks for. */
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
    object.adds = info->dlpi_adds;
    object.subs = info->dlpi_subs;
  }
  return walk->visit(&object, walk->context);
}

int il_iterate_objects(int (*visit)(const il_object *object, void *context), void *context) {
  struct il_walk walk = { visit, context };
  return dl_iterate_phdr(il_walk_one, &walk);
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

uint64_t il_vdso_address(void) { return (uint64_t)getauxval(AT_SYSINFO_EHDR); }

uint64_t il_page_size(void) {
  unsigned long size = getauxval(AT_PAGESZ);
  return size ? (uint64_t)size : 4096;
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
