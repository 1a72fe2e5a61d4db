/* rtld-audit module for `imagelog run`: see CImageLogAudit.h for what imagelog passes.
 *
 * imagelog execs the command with this module in LD_AUDIT; from then on imagelog is gone and the
 * module is the whole tool. Each image the loader adds (la_objopen) or removes (la_objclose in a
 * dlclose) is formatted here, in the style asked for, with the C that the crash handler and the
 * snapshot share (CImageLogImage.h, held byte for byte against the Swift ImageFormatter by the
 * tests), and written with one write(2) to the descriptor imagelog left open.
 *
 * Constraints: the loader calls us with its lock held, before the program's libc is set up, and in
 * a namespace of our own. So: no malloc, no stdio, no locks; errno is saved and restored around
 * every hook, so the program never sees ours. The line buffer is static: the loader lock
 * serializes the hooks, and a forked child has its own copy. The program headers come from the
 * loader itself (dlinfo RTLD_DI_PHDR, glibc 2.35 and later; AT_PHDR for the executable), so the
 * usual image costs one system call: its write. */
#define _GNU_SOURCE
#include "CImageLogAudit.h"
#include "CImageLogImage.h"
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* SwiftPM links every product with the Swift driver, which adds swiftrt.o and -lswiftCore. Loaded
   by LD_AUDIT, that would bring the Swift runtime, libstdc++ and a second libm into the audit
   namespace of every program, at each start (the cost: BENCHMARKS.md). So: swiftrt.o's two references to the
   runtime are satisfied here (hidden, never called by anything that matters for a C library),
   and an autolink entry (the Swift driver's own mechanism, read by swift-autolink-extract and put
   before -lswiftCore on the link line) makes the linker drop libraries nothing uses. The module's
   only dependency is then libc. */
__asm__(".section .swift1_autolink_entries,\"e\"\n.asciz \"-Wl,--as-needed\"\n.previous\n");
__attribute__((visibility("hidden"))) void swift_addNewDSOImage(const void *image) { (void)image; }
__attribute__((visibility("hidden"))) int _swift_backtrace_isThunkFunction(const char *name) { (void)name; return 0; }

static int output_fd = -1;
static il_line_options options;
static uintptr_t page_size = 4096;
static pid_t own_pid;
/* The process imagelog became: its lines are not labelled. */
static pid_t first_pid;
/* The kernel's AT_PHDR, AT_PHNUM and AT_SYSINFO_EHDR, read once. */
static uintptr_t main_phdrs, main_phnum, vdso_header;
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
#define IL_RTLD_DI_PHDR RTLD_DI_PHDR
#else
#define IL_RTLD_DI_PHDR 11  /* the request number glibc 2.35 gave it; older ones refuse it */
#endif

/* getpid(2) is a system call (glibc stopped caching it), and the module needs the PID for every
   line only to notice a fork. A page marked MADV_WIPEONFORK reads back as zeros in a forked child:
   fork_page[0] is 1 in the process that set it, 0 in a fork that has not looked up its PID yet. The
   page sits in .bss past the file-backed part (page-aligned, so it is in the loader's anonymous
   zero-fill mapping); where madvise refuses (a kernel before 4.14) or pages are larger than the
   array, every event asks getpid. */
static unsigned char fork_page[4096] __attribute__((aligned(4096)));
static int fork_page_armed;

static void arm_fork_page(void) {
  /* Only where the array is exactly one page: a larger page would wipe other variables too. */
  if (page_size == sizeof fork_page && ((uintptr_t)fork_page & (page_size - 1)) == 0)
    fork_page_armed = madvise(fork_page, sizeof fork_page, MADV_WIPEONFORK) == 0;
  fork_page[0] = 1;
}

/* The PID of the calling process, without a system call unless it forked since the last look. */
static pid_t current_pid(void) {
  if (fork_page_armed && fork_page[0] == 1) return own_pid;
  own_pid = getpid();
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
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* One line: a path of PATH_MAX bytes escaped at up to 4 bytes each, twice in the unstrip style. */
static char line_text[40960];

/* Writes the line with one write(2) (a line up to PIPE_BUF bytes reaches a pipe whole, between other
   writers' lines). A descriptor that is gone (closed by the program, a reader that left) silences
   the module; the program goes on as if it were not there. */
static void emit(il_line *line) {
  if (line->truncated) line->used = line->capacity - 1;
  line->text[line->used++] = '\n';
  size_t done = 0;
  while (done < line->used) {
    ssize_t written = write(output_fd, line->text + done, line->used - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) { output_fd = -1; return; }
    done += (size_t)written;
  }
}

static void report(int removed, struct link_map *map, uint64_t since_start, uint64_t step) {
  static char executable[4096];
  const char *path = map->l_name;
  int is_main = 0;
  if (map == main_map || (main_map == NULL && (path == NULL || path[0] == '\0') && main_phdrs != 0)) {
    is_main = 1;
    main_map = map;
    if (executable[0] == '\0') {
      ssize_t length = readlink("/proc/self/exe", executable, sizeof executable - 1);
      executable[length > 0 ? length : 0] = '\0';
    }
    path = executable;
  }
  /* The loader's own table: for the executable that is AT_PHDR; for the others the one the loader
     read when it mapped the object (in the image, or its copy). */
  const ElfW(Phdr) *table = NULL;
  int count = dlinfo(map, IL_RTLD_DI_PHDR, &table);
  if ((count <= 0 || table == NULL) && is_main) { table = (const ElfW(Phdr) *)main_phdrs; count = (int)main_phnum; }
  if (count <= 0 || table == NULL) return;  /* not an object we can describe: say nothing rather than something wrong */
  il_image image;
  if (!il_image_describe(table, (size_t)count, (uint64_t)map->l_addr, page_size, &image)) return;
  image.path = path != NULL ? path : "";
  image.architecture = il_native_architecture();
  image.is_main = is_main;
  if (vdso_header != 0 && image.load_address == vdso_header && !is_main) image.path = "[vdso]";
  il_line_options event = options;
  event.removed = removed;
  event.since_start_ns = since_start;
  event.step_ns = step;
  event.pid = current_pid();
  event.labelled = event.pid != first_pid;
  il_line line = { line_text, sizeof line_text - 1, 0, 0 };  /* keeps room for '\n' */
  il_image_line(&line, &image, &event);
  emit(&line);
}

/* ---- the environment: what imagelog passed, and what the program's children must not inherit ---- */

/* Removes our module from LD_AUDIT in place (the strings live on the initial stack, shared with the
   program's libc), and drops the IMAGELOG_AUDIT_* variables, so the program's children run plain. */
static void clean_environment(const char *module_path) {
  size_t module_length = strlen(module_path);
  char **write_at = environ;
  for (char **read_at = environ; *read_at != NULL; read_at++) {
    char *entry = *read_at;
    if (strncmp(entry, "IMAGELOG_AUDIT_", 15) == 0) continue;
    if (strncmp(entry, "LD_AUDIT=", 9) == 0 && strncmp(entry + 9, module_path, module_length) == 0) {
      char *rest = entry + 9 + module_length;
      if (*rest == '\0') continue;
      if (*rest == ':') memmove(entry + 9, rest + 1, strlen(rest + 1) + 1);
    }
    *write_at++ = entry;
  }
  *write_at = NULL;
}

static int parse_number(const char *text, uint64_t *value) {
  if (text == NULL || *text == '\0') return 0;
  uint64_t result = 0;
  for (; *text; text++) {
    if (*text < '0' || *text > '9' || result > (UINT64_MAX - 9) / 10) return 0;
    result = result * 10 + (uint64_t)(*text - '0');
  }
  *value = result;
  return 1;
}

/* Always accepts the interface version: a module that returns 0 is unloaded, and glibc asserts
   (rtld.c unload_audit_module) when the module brought dependencies into its namespace. Without a
   usable IMAGELOG_AUDIT_FD the module stays loaded but inert. */
unsigned int la_version(unsigned int version) {
  int saved_errno = errno;
  unsigned int accepted = version < LAV_CURRENT ? version : LAV_CURRENT;
  uint64_t fd = 0, device = 0, inode = 0, pid = 0;
  const char *identity = getenv("IMAGELOG_AUDIT_FILE");
  struct stat info;
  /* The descriptor must still be the file imagelog opened: a program that closed it and opened
     something else on its number (then executed another program) must not get our lines. */
  int usable = parse_number(getenv("IMAGELOG_AUDIT_FD"), &fd) && fd <= 1 << 20 && fstat((int)fd, &info) == 0;
  if (usable && identity != NULL) {
    char device_text[24] = {0}, inode_text[24] = {0};
    const char *colon = strchr(identity, ':');
    if (colon == NULL || (size_t)(colon - identity) >= sizeof device_text || strlen(colon + 1) >= sizeof inode_text) usable = 0;
    else {
      memcpy(device_text, identity, (size_t)(colon - identity));
      strcpy(inode_text, colon + 1);
      usable = parse_number(device_text, &device) && parse_number(inode_text, &inode)
               && (uint64_t)info.st_dev == device && (uint64_t)info.st_ino == inode;
    }
  }
  if (usable) output_fd = (int)fd;
  const char *style = getenv("IMAGELOG_AUDIT_FORMAT");
  options.style = IL_STYLE_LOGGER;
  if (style != NULL && strcmp(style, "crash") == 0) options.style = IL_STYLE_CRASH;
  if (style != NULL && strcmp(style, "unstrip") == 0) options.style = IL_STYLE_UNSTRIP;
  if (style != NULL && strcmp(style, "json") == 0) options.style = IL_STYLE_JSON;
  options.full_build_ids = getenv("IMAGELOG_AUDIT_FULL_BUILD_IDS") != NULL;
  options.timing = getenv("IMAGELOG_AUDIT_TIMING") != NULL;
  if (!parse_number(getenv("IMAGELOG_AUDIT_START_NS"), &start_ns)) start_ns = 0;
  int follow = getenv("IMAGELOG_AUDIT_NO_FOLLOW") == NULL;
  own_pid = getpid();
  first_pid = parse_number(getenv("IMAGELOG_AUDIT_PID"), &pid) ? (pid_t)pid : own_pid;
  long size = sysconf(_SC_PAGESIZE);
  if (size > 0) page_size = (uintptr_t)size;
  arm_fork_page();
  main_phdrs = getauxval(AT_PHDR);
  main_phnum = getauxval(AT_PHNUM);
  vdso_header = getauxval(AT_SYSINFO_EHDR);
  mark_ns = now_ns();
  if (start_ns == 0 || start_ns > mark_ns) start_ns = mark_ns;
  if (!follow) {
    /* The command's own process only: its children run plain, and exec closes the descriptor. Last,
       once every variable above was read. */
    const char *module_path = getenv("IMAGELOG_AUDIT_MODULE");
    if (module_path != NULL) {
      static char saved[4096];
      size_t length = strlen(module_path);
      if (length < sizeof saved) { memcpy(saved, module_path, length + 1); clean_environment(saved); }
    }
    if (usable) fcntl((int)fd, F_SETFD, FD_CLOEXEC);
  }
  errno = saved_errno;
  return accepted;
}

/* Called with LA_SER_ORIG when the loader starts looking for an object by the name it was asked
   for (before each search-path candidate); the name is returned unchanged. */
char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag) {
  (void)cookie;
  if (output_fd >= 0 && options.timing && flag == LA_SER_ORIG) {
    int saved_errno = errno;
    mark_ns = now_ns();
    errno = saved_errno;
  }
  return (char *)name;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie) {
  (void)cookie;
  /* Only the program's namespaces: LM_ID_BASE, and dlmopen's; never the audit namespace (the loader
     does not report it to us anyway). */
  (void)lmid;
  if (output_fd < 0) return 0;
  int saved_errno = errno;
  if (options.timing) {
    uint64_t time = now_ns();
    report(0, map, time - start_ns, time >= mark_ns ? time - mark_ns : 0);
    mark_ns = now_ns();  /* the next object's step starts after our own work */
  } else {
    report(0, map, 0, 0);
  }
  errno = saved_errno;
  return 0;  /* no LA_FLG_BINDTO/BINDFROM: symbol binding is not audited, so no PLT trampolines */
}

/* The loader starts each cookie as the object's link map (and we never change it). The object is
   still mapped here, so the line carries the same fields as its add. */
unsigned int la_objclose(uintptr_t *cookie) {
  if (output_fd < 0 || cookie == NULL || exiting) return 0;
  struct link_map *map = (struct link_map *)*cookie;
  /* _dl_fini closes the main executable first: from then on the process is exiting, and the images
     are not being unloaded in any sense a reader of the log cares about. */
  if (map == main_map) { exiting = 1; return 0; }
  int saved_errno = errno;
  report(1, map, 0, 0);
  errno = saved_errno;
  return 0;
}
