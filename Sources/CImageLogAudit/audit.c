/* rtld-audit module for `imagelog run`: see CImageLogAudit.h for what imagelog passes.
 *
 * imagelog execs the command with this module in LD_AUDIT; from then on imagelog is gone and the
 * module is the whole tool. Each image the loader adds (la_objopen) or removes (la_objclose in a
 * dlclose) is formatted here, in the style asked for, with the C that the crash handler and the
 * snapshot share (CImageLogImage.h, held byte for byte against the Swift ImageFormatter by the
 * tests), and written with one write(2) to the descriptor imagelog left open.
 *
 * Constraints: the loader calls us with its lock held, before the program's libc is set up, and in
 * a namespace of our own. So: no malloc, no stdio, no locks. The line buffer is static: the loader
 * lock serializes the hooks, and a forked child has its own copy.
 *
 * No libc and no Swift runtime (audit_libc.h says why, and holds what stands in for them). Nothing
 * the module does touches the program's errno (it has none of its own either).
 *
 * Program headers: the loader's own table for each object, as dlinfo(RTLD_DI_PHDR) returns it
 * (which is libc's). glibc keeps it in the link map, in the fields l_phdr, l_entry and l_phnum, one
 * after the other, past the public part and the l_info array whose length changes between
 * versions; the module finds them once in the executable's link map, where the three must equal the
 * kernel's AT_PHDR, AT_ENTRY and AT_PHNUM, and checks the place against the loader's own link map
 * (whose program headers its ELF header at AT_BASE gives). Should a C library keep them elsewhere,
 * the module says so in one line and reports only the executable, the loader and the vDSO, whose
 * program headers it has without the link map. */
#define _GNU_SOURCE
#include "CImageLogAudit.h"
#include "CImageLogImage.h"
#include "audit_libc.h"
#include "audit_crash.h"
#include <elf.h>
#include <errno.h>  /* the E* numbers only: the module has no errno */
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

/* ---- state ---- */

static int output_fd = -1;
static il_line_options options;
static uintptr_t page_size = 4096;
static pid_t own_pid;
/* The process imagelog became: its lines are not labelled. */
static pid_t first_pid;
/* The kernel's AT_PHDR, AT_PHNUM, AT_BASE and AT_SYSINFO_EHDR, read once. */
static uintptr_t at_phdr, at_phnum, loader_base, vdso_header;
/* The vDSO's load bias (its header's address less its first segment's address). */
static uintptr_t vdso_bias;

/* getpid(2) is a system call, and the module needs the PID for every line only to notice a fork. A
   page marked MADV_WIPEONFORK reads back as zeros in a forked child: fork_page[0] is 1 in the
   process that set it, 0 in a fork that has not looked up its PID yet. The page sits in .bss past
   the file-backed part (page-aligned, so it is in the loader's anonymous zero-fill mapping); where
   madvise refuses (a kernel before 4.14) or pages are larger than the array, every event asks getpid. */
static unsigned char fork_page[4096] __attribute__((aligned(4096)));
static int fork_page_armed;

static void arm_fork_page(void) {
  /* Only where the array is exactly one page: a larger page would wipe other variables too. */
  if (page_size == sizeof fork_page && ((uintptr_t)fork_page & (page_size - 1)) == 0)
    fork_page_armed = SYS(SYS_madvise, fork_page, sizeof fork_page, MADV_WIPEONFORK) == 0;
  fork_page[0] = 1;
}

/* The PID of the calling process, without a system call unless it forked since the last look. */
static pid_t current_pid(void) {
  if (fork_page_armed && fork_page[0] == 1) return own_pid;
  own_pid = (pid_t)SYS(SYS_getpid, 0);
  fork_page[0] = 1;
  return own_pid;
}

static uint64_t start_ns;
/* The start of the step that ends at the next la_objopen: when the loader began looking for the
   object (la_objsearch with LA_SER_ORIG, before it opens and maps the file), else the previous
   la_objopen. The loader serializes every call below under its lock. */
static uint64_t mark_ns;
/* The program's own link map: the first object of the base namespace, with an empty name. */
static struct link_map *main_map;
/* Set once the main executable is closed: that only happens in _dl_fini, as the process exits. */
static int exiting;

static uint64_t now_ns(void) {
  struct timespec now = { 0, 0 };
  SYS(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* One line: a path of PATH_MAX bytes escaped at up to 4 bytes each, twice in the unstrip style. */
static char line_text[40960];

/* Writes `length` bytes with one write(2) where it can (a line up to PIPE_BUF bytes reaches a pipe
   whole, between other writers' lines). A descriptor that is gone (closed by the program, a reader
   that left) silences the module; the program goes on as if it were not there. */
static void write_line(const char *text, size_t length) {
  size_t done = 0;
  while (done < length) {
    long written = SYS(SYS_write, output_fd, text + done, length - done);
    if (written == -EINTR) continue;
    if (written <= 0) { output_fd = -1; return; }
    done += (size_t)written;
  }
}

static void emit(il_line *line) {
  if (line->truncated) line->used = line->capacity - 1;
  line->text[line->used++] = '\n';
  write_line(line->text, line->used);
}

/* ---- program headers ---- */

/* Where glibc's link map keeps l_phdr (l_phnum is two words after it, past l_entry): 0 until found,
   -1 when this C library keeps them elsewhere. */
static long phdr_field;
/* Link maps searched for it so far. */
static int maps_searched;

/* The program headers of the ELF image whose header is mapped at `header` (the loader, the vDSO). */
static const ElfW(Phdr) *headers_of_image(uintptr_t header, size_t *count) {
  const ElfW(Ehdr) *elf = (const ElfW(Ehdr) *)header;
  if (header == 0 || memcmp(elf->e_ident, ELFMAG, SELFMAG) != 0 || elf->e_phentsize != sizeof(ElfW(Phdr))) return NULL;
  *count = elf->e_phnum;
  return (const ElfW(Phdr) *)(header + elf->e_phoff);
}

/* Looks for the field in `map`: the word past the public part that holds the kernel's AT_PHDR with
   AT_PHNUM two words later. The kernel's table is the executable's (the first map), or the loader's
   when the loader runs as the program (`ld.so PROGRAM`: then the loader's map, the second, holds it).
   The search stays within the first kilobyte: a link map is larger (its l_info array alone is about
   600 bytes). Given up after the first three maps. */
static void find_phdr_field(const struct link_map *map) {
  const unsigned char *bytes = (const unsigned char *)map;
  if (at_phdr != 0) {
    for (size_t offset = sizeof(struct link_map); offset + 2 * sizeof(uintptr_t) + sizeof(ElfW(Half)) <= 1024;
         offset += sizeof(uintptr_t)) {
      uintptr_t phdr;
      ElfW(Half) count;
      memcpy(&phdr, bytes + offset, sizeof phdr);
      memcpy(&count, bytes + offset + 2 * sizeof(uintptr_t), sizeof count);
      if (phdr == at_phdr && count == at_phnum) { phdr_field = (long)offset; return; }
    }
  }
  if (++maps_searched >= 3) phdr_field = -1;
}

/* The loader's table for `map` from its link map, or NULL. */
static const ElfW(Phdr) *link_map_headers(const struct link_map *map, size_t *count) {
  if (phdr_field <= 0) return NULL;
  const unsigned char *bytes = (const unsigned char *)map;
  const ElfW(Phdr) *table;
  ElfW(Half) number;
  memcpy(&table, bytes + phdr_field, sizeof table);
  memcpy(&number, bytes + phdr_field + 2 * sizeof(uintptr_t), sizeof number);
  *count = number;
  return table;
}

/* The program headers the loader mapped `map` by: the kernel's for the executable; for the loader
   (when it is not the program) and the vDSO, those their ELF header gives, which also check the
   link map's field (a field that disagrees is not used again); for the others the one the loader
   read when it mapped the object (in the image, or its copy). NULL when unknown. */
static const ElfW(Phdr) *headers_of(const struct link_map *map, int is_main, size_t *count) {
  if (phdr_field == 0) find_phdr_field(map);
  const ElfW(Phdr) *table = NULL;
  if (is_main && loader_base != 0) {
    *count = at_phnum;
    return (const ElfW(Phdr) *)at_phdr;
  }
  if (loader_base != 0 && (uintptr_t)map->l_addr == loader_base) table = headers_of_image(loader_base, count);
  else if (vdso_header != 0 && (uintptr_t)map->l_addr == vdso_bias) table = headers_of_image(vdso_header, count);
  else return link_map_headers(map, count);
  size_t field_count = 0;
  const ElfW(Phdr) *field = link_map_headers(map, &field_count);
  if (field != NULL && (field != table || field_count != *count)) phdr_field = -1;
  return table;
}

/* Said once, when the link map's fields are not where glibc keeps them. */
static void say_layout_unknown(void) {
  static int said;
  if (said) return;
  said = 1;
  static const char text[] = "imagelog: the audit module cannot find program headers in this C library's link maps; "
                             "only the executable, the loader and the vDSO are reported\n";
  write_line(text, sizeof text - 1);
}

/* `map` as its line describes it, from the program headers `table` (`count` of them). 0 when they
   describe no image. The path points into `map` or a static buffer. */
static int describe_image(const struct link_map *map, int is_main, const ElfW(Phdr) *table, size_t count,
                          il_image *image) {
  static char executable[4096];
  const char *path = map->l_name;
  if (is_main) {
    if (executable[0] == '\0') {
      long length = SYS(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", executable, sizeof executable - 1);
      executable[length > 0 ? length : 0] = '\0';
    }
    path = executable;
  }
  if (count == 0 || !il_image_describe(table, count, (uint64_t)map->l_addr, page_size, image)) return 0;
  image->path = path != NULL ? path : "";
  image->architecture = il_native_architecture();
  image->is_main = is_main;
  if (vdso_header != 0 && image->load_address == vdso_header && !is_main) image->path = "[vdso]";
  return 1;
}

/* `map` described from the program headers the loader mapped it by (headers_of). */
static int describe_map(const struct link_map *map, int is_main, il_image *image) {
  size_t count = 0;
  const ElfW(Phdr) *table = headers_of(map, is_main, &count);
  return table != NULL && describe_image(map, is_main, table, count, image);
}

/* How long the image being removed had been loaded (nanoseconds), UINT64_MAX when unknown: set by
   la_objclose for the Removed line it writes. */
static uint64_t closing_loaded_for = UINT64_MAX;

static void write_event(int removed, const struct link_map *map, int is_main, const ElfW(Phdr) *table, size_t count,
                        uint64_t since_start, uint64_t step) {
  il_image image;
  if (!describe_image(map, is_main, table, count, &image)) return;
  il_line_options event = options;
  event.removed = removed;
  event.since_start_ns = since_start;
  event.step_ns = step;
  event.pid = current_pid();
  event.labelled = event.pid != first_pid;
  event.has_loaded_for = removed && closing_loaded_for != UINT64_MAX;
  event.loaded_for_ns = closing_loaded_for;
  il_line line = { line_text, sizeof line_text - 1, 0, 0 };  /* keeps room for '\n' */
  il_image_line(&line, &image, &event);
  emit(&line);
}

/* The executable's add, when its program headers are known only from its link map and the field
   is not found yet (`ld.so PROGRAM`): written as soon as the next map finds it, before that map's. */
static const struct link_map *pending_main;
static uint64_t pending_since_start, pending_step;

static void report(int removed, struct link_map *map, uint64_t since_start, uint64_t step) {
  int is_main = 0;
  if (map == main_map || (main_map == NULL && (map->l_name == NULL || map->l_name[0] == '\0'))) {
    is_main = 1;
    main_map = map;
  }
  size_t count = 0;
  const ElfW(Phdr) *table = headers_of(map, is_main, &count);
  if (pending_main != NULL && phdr_field != 0) {
    size_t main_count = 0;
    const ElfW(Phdr) *main_table = link_map_headers(pending_main, &main_count);
    if (main_table != NULL) write_event(0, pending_main, 1, main_table, main_count, pending_since_start, pending_step);
    pending_main = NULL;
  }
  if (table == NULL) {
    if (is_main && !removed && phdr_field == 0) {
      pending_main = map;
      pending_since_start = since_start;
      pending_step = step;
      return;
    }
    say_layout_unknown();
    return;  /* not an object we can describe: say nothing rather than something wrong */
  }
  write_event(removed, map, is_main, table, count, since_start, step);
}

#include "audit_crash_report.h"

/* ---- the images the program removed, kept for a crash (crash_unloaded.h) ---- */

/* When each open object was added (CLOCK_REALTIME ns), by link map: a fixed table (no allocation),
   oldest entry reused when full; an object not found there has an unknown load time. */
enum { AUDIT_OPENED = 1024 };
static const struct link_map *opened_maps[AUDIT_OPENED];
static int64_t opened_ns[AUDIT_OPENED];
static unsigned opened_next;

static void remember_opened(const struct link_map *map) {
  unsigned slot = opened_next;
  for (unsigned i = 0; i < AUDIT_OPENED; i++)
    if (opened_maps[i] == NULL || opened_maps[i] == map) { slot = i; break; }
  if (slot == opened_next) opened_next = (opened_next + 1) % AUDIT_OPENED;
  opened_maps[slot] = map;
  opened_ns[slot] = il_unloaded_now_ns();
  il_image image;
  /* A load in the report's timeline once the program's startup set is loaded (la_preinit). */
  if (__atomic_load_n(&audit_unloaded.loads_recorded, __ATOMIC_SEQ_CST) && describe_map(map, 0, &image))
    il_unloaded_record_load(&audit_unloaded, image.load_address, opened_ns[slot], image.path);
}

/* Called once every object of the program's start is loaded, before its initializers: from now on a
   load is an event of the report's timeline. */
void la_preinit(uintptr_t *cookie) {
  (void)cookie;
  il_unloaded_start(&audit_unloaded);
}

/* Keeps `map`, being closed, among the removed images, with its load time (forgotten here), and sets
   closing_loaded_for for its Removed line. */
static void remember_closed(const struct link_map *map) {
  int64_t loaded = 0;
  for (unsigned i = 0; i < AUDIT_OPENED; i++) {
    if (opened_maps[i] != map) continue;
    loaded = opened_ns[i];
    opened_maps[i] = NULL;
    break;
  }
  int64_t now = il_unloaded_now_ns();
  closing_loaded_for = loaded != 0 && now >= loaded ? (uint64_t)(now - loaded) : UINT64_MAX;
  il_image image;
  if (!describe_map(map, 0, &image)) return;
  il_unloaded_record(&audit_unloaded, image.load_address, image.load_end - image.load_address, image.load_bias,
                     loaded, now, image.build_id, image.build_id_size, image.path);
}

/* ---- the environment: what imagelog passed, and what the program's children must not inherit ---- */

/* Removes our module from LD_AUDIT in place (the strings live on the initial stack, shared with the
   program's libc), and drops the IMAGELOG_AUDIT_* variables, so the program's children run plain. */
static void clean_environment(const char *module_path) {
  size_t module_length = strlen(module_path);
  char **write_at = environment;
  for (char **read_at = environment; *read_at != NULL; read_at++) {
    char *entry = *read_at;
    const char *value;
    if (memcmp(entry, "IMAGELOG_AUDIT_", 15) == 0) continue;  /* stops at a difference: never past the NUL */
    if (variable_named(entry, "LD_AUDIT", &value) && strlen(value) >= module_length && memcmp(value, module_path, module_length) == 0) {
      char *rest = entry + 9 + module_length;
      if (*rest == '\0') continue;
      if (*rest == ':') {
        char *to = entry + 9;
        const char *from = rest + 1;
        while ((*to++ = *from++) != '\0') {}
      }
    }
    *write_at++ = entry;
  }
  *write_at = NULL;
}


/* Always accepts the interface version: a module that returns 0 is unloaded, and glibc asserts
   (rtld.c unload_audit_module) when the module brought dependencies into its namespace. Without a
   usable IMAGELOG_AUDIT_FD the module stays loaded but inert. */
unsigned int la_version(unsigned int version) {
  unsigned int accepted = version < LAV_CURRENT ? version : LAV_CURRENT;
  uint64_t fd = 0, device = 0, inode = 0, pid = 0;
  const char *identity = variable("IMAGELOG_AUDIT_FILE");
  struct stat info;
  /* The descriptor must still be the file imagelog opened: a program that closed it and opened
     something else on its number (then executed another program) must not get our lines. */
  int usable = parse_number(variable("IMAGELOG_AUDIT_FD"), &fd) && fd <= 1 << 20 && SYS(SYS_fstat, (int)fd, &info) == 0;
  if (usable && identity != NULL) {
    char device_text[24] = {0}, inode_text[24] = {0};
    size_t colon = 0;
    while (identity[colon] != '\0' && identity[colon] != ':') colon++;
    size_t rest = strlen(identity + colon);
    if (identity[colon] != ':' || colon >= sizeof device_text || rest - 1 >= sizeof inode_text) usable = 0;
    else {
      memcpy(device_text, identity, colon);
      memcpy(inode_text, identity + colon + 1, rest - 1);
      usable = parse_number(device_text, &device) && parse_number(inode_text, &inode)
               && (uint64_t)info.st_dev == device && (uint64_t)info.st_ino == inode;
    }
  }
  if (usable) output_fd = (int)fd;
  const char *style = variable("IMAGELOG_AUDIT_FORMAT");
  options.style = IL_STYLE_LOGGER;
  if (same_text(style, "crash")) options.style = IL_STYLE_CRASH;
  if (same_text(style, "unstrip")) options.style = IL_STYLE_UNSTRIP;
  if (same_text(style, "json")) options.style = IL_STYLE_JSON;
  options.full_build_ids = variable("IMAGELOG_AUDIT_FULL_BUILD_IDS") != NULL;
  options.timing = variable("IMAGELOG_AUDIT_TIMING") != NULL;
  if (!parse_number(variable("IMAGELOG_AUDIT_START_NS"), &start_ns)) start_ns = 0;
  int follow = variable("IMAGELOG_AUDIT_NO_FOLLOW") == NULL;
  own_pid = (pid_t)SYS(SYS_getpid, 0);
  first_pid = parse_number(variable("IMAGELOG_AUDIT_PID"), &pid) ? (pid_t)pid : own_pid;
  uintptr_t size = auxiliary_value(AT_PAGESZ);
  if (size != 0) page_size = size;
  arm_fork_page();
  /* Without AT_BASE the loader runs as the program (`ld.so PROGRAM`): AT_PHDR is the loader's, and
     the executable's program headers are only in its link map. */
  at_phdr = auxiliary_value(AT_PHDR);
  at_phnum = auxiliary_value(AT_PHNUM);
  loader_base = auxiliary_value(AT_BASE);
  vdso_header = auxiliary_value(AT_SYSINFO_EHDR);
  size_t vdso_count = 0;
  const ElfW(Phdr) *vdso_headers = headers_of_image(vdso_header, &vdso_count);
  il_layout vdso_layout;
  if (vdso_headers != NULL && il_image_layout(vdso_headers, vdso_count, 0, page_size, &vdso_layout))
    vdso_bias = vdso_header - (uintptr_t)vdso_layout.first_vaddr;
  mark_ns = now_ns();
  if (start_ns == 0 || start_ns > mark_ns) start_ns = mark_ns;
  uint64_t kept = IL_UNLOADED_DEFAULT;
  if (!parse_number(variable("IMAGELOG_AUDIT_UNLOADED_HISTORY"), &kept) || kept > IL_UNLOADED_MAX)
    kept = IL_UNLOADED_DEFAULT;
  il_unloaded_init(&audit_unloaded, (uint32_t)kept);
  audit_install_crash_handler();
  if (!follow) {
    /* The command's own process only: its children run plain, and exec closes the descriptor. Last,
       once every variable above was read. */
    const char *module_path = variable("IMAGELOG_AUDIT_MODULE");
    if (module_path != NULL && environment != NULL) {
      static char saved[4096];
      size_t length = strlen(module_path);
      if (length < sizeof saved) { memcpy(saved, module_path, length + 1); clean_environment(saved); }
    }
    if (usable) SYS(SYS_fcntl, (int)fd, F_SETFD, FD_CLOEXEC);
  }
  return accepted;
}

/* Called with LA_SER_ORIG when the loader starts looking for an object by the name it was asked
   for (before each search-path candidate); the name is returned unchanged. */
char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag) {
  (void)cookie;
  if (output_fd >= 0 && options.timing && flag == LA_SER_ORIG) mark_ns = now_ns();
  return (char *)name;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie) {
  (void)cookie;
  /* Only the program's namespaces: LM_ID_BASE, and dlmopen's; never the audit namespace (the loader
     does not report it to us anyway). */
  if (crash_first_map == NULL && lmid == LM_ID_BASE) crash_first_map = map;
  remember_opened(map);
  if (output_fd < 0) return 0;
  if (options.timing) {
    uint64_t time = now_ns();
    report(0, map, time - start_ns, time >= mark_ns ? time - mark_ns : 0);
    mark_ns = now_ns();  /* the next object's step starts after our own work */
  } else {
    report(0, map, 0, 0);
  }
  return 0;  /* no LA_FLG_BINDTO/BINDFROM: symbol binding is not audited, so no PLT trampolines */
}

/* The loader starts each cookie as the object's link map (and we never change it). The object is
   still mapped here, so the line carries the same fields as its add. */
unsigned int la_objclose(uintptr_t *cookie) {
  if (cookie == NULL || exiting) return 0;
  struct link_map *map = (struct link_map *)*cookie;
  /* _dl_fini closes the main executable first: from then on the process is exiting, and the images
     are not being unloaded in any sense a reader of the log cares about. */
  if (map == main_map) { exiting = 1; return 0; }
  remember_closed(map);
  if (output_fd < 0) return 0;
  report(1, map, 0, 0);
  return 0;
}
