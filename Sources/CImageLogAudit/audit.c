/* rtld-audit module for `imagelog run`: see CImageLogAudit.h for the record format.
 *
 * Constraints: the loader calls us with its lock held, before the program's libc is set up, and in
 * a namespace of our own. So: no malloc (nothing to free), no stdio, no locks. The command's own
 * process copies its records into the shared ring the CLI passed (one mapping for the life of the
 * process image, the only memory the module takes); any other process (a fork, a followed exec)
 * sends them in units of at most 4096 bytes on the socket, which a concurrent writer cannot split.
 * The program headers come from the loader itself (dlinfo RTLD_DI_PHDR: the table it reads, mapped
 * or copied), and the ELF header and build-id note are read in place only where those headers
 * prove the bytes mapped and readable (in the first page of the file, inside a readable PT_LOAD);
 * anything else, and every read on a glibc before 2.35, goes through process_vm_readv on ourselves,
 * which fails with EFAULT instead of faulting when an address is not mapped. So the usual image
 * costs no system call at all. */
#define _GNU_SOURCE
#include "CImageLogAudit.h"
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* SwiftPM links every product with the Swift driver, which adds swiftrt.o and -lswiftCore. Loaded
   by LD_AUDIT, that would bring the Swift runtime, libstdc++ and a second libm into the audit
   namespace of every program: about 5 ms at each start. So: swiftrt.o's two references to the
   runtime are satisfied here (hidden, never called by anything that matters for a C library),
   and an autolink entry (the Swift driver's own mechanism, read by swift-autolink-extract and put
   before -lswiftCore on the link line) makes the linker drop libraries nothing uses. The module's
   only dependency is then libc. */
__asm__(".section .swift1_autolink_entries,\"e\"\n.asciz \"-Wl,--as-needed\"\n.previous\n");
__attribute__((visibility("hidden"))) void swift_addNewDSOImage(const void *image) { (void)image; }
__attribute__((visibility("hidden"))) int _swift_backtrace_isThunkFunction(const char *name) { (void)name; return 0; }

static int record_fd = -1;
static uintptr_t page_size = 4096;
static pid_t own_pid;
/* The kernel's AT_PHDR, AT_PHNUM and AT_SYSINFO_EHDR, read once. */
static uintptr_t main_phdrs, main_phnum, vdso_header;
/* dlinfo(RTLD_DI_PHDR) is glibc 2.35 and later; cleared when the running glibc refuses it. */
static int loader_gives_phdrs = 1;
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
#define IL_RTLD_DI_PHDR RTLD_DI_PHDR
#else
#define IL_RTLD_DI_PHDR 11  /* the request number glibc 2.35 gave it; older ones refuse it */
#endif

/* getpid(2) is a system call (glibc stopped caching it), and the module needs the PID for every
   record only to notice a fork. A page marked MADV_WIPEONFORK reads back as zeros in a forked child:
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

/* The page holding the image being described: its ELF header, program headers and (nearly
   always) build-id note, copied with one system call. The loader lock serializes its use. */
static unsigned char header_page[4096];
static uintptr_t header_page_address;
static size_t header_page_size;

/* Copies `length` bytes at `address` of this process; 0 on success, -1 when any of it is unmapped.
   Served from header_page when it holds the range. */
static int safe_read(uintptr_t address, void *buffer, size_t length) {
  if (header_page_size != 0 && address >= header_page_address
      && address - header_page_address <= header_page_size
      && length <= header_page_size - (address - header_page_address)) {
    memcpy(buffer, header_page + (address - header_page_address), length);
    return 0;
  }
  struct iovec local = { buffer, length };
  struct iovec remote = { (void *)address, length };
  return process_vm_readv(own_pid, &local, 1, &remote, 1, 0) == (ssize_t)length ? 0 : -1;
}

/* Loads header_page from the page at `address` (page-aligned); 0 on success. */
static int load_header_page(uintptr_t address) {
  header_page_size = 0;
  size_t length = page_size < sizeof header_page ? page_size : sizeof header_page;
  if (safe_read(address, header_page, length) != 0) return -1;
  header_page_address = address;
  header_page_size = length;
  return 0;
}

/* ---- the record line, built without stdio ---- */

typedef struct { char text[3584]; size_t used; } line_buffer;

static void put_text(line_buffer *line, const char *text, size_t length) {
  size_t room = sizeof line->text - 2 - line->used;  /* keeps room for '\n' */
  if (length > room) length = room;
  memcpy(line->text + line->used, text, length);
  line->used += length;
}

static void put_char(line_buffer *line, char character) {
  if (line->used < sizeof line->text - 2) line->text[line->used++] = character;  /* keeps room for '\n' */
}

static void put_hex(line_buffer *line, uint64_t value) {
  char digits[17];
  int count = 0;
  do { digits[16 - count++] = "0123456789abcdef"[value & 15]; value >>= 4; } while (value != 0);
  put_text(line, digits + 17 - count, (size_t)count);
}

static void put_decimal(line_buffer *line, uint64_t value) {
  char digits[21];
  int count = 0;
  do { digits[20 - count++] = (char)('0' + value % 10); value /= 10; } while (value != 0);
  put_text(line, digits + 21 - count, (size_t)count);
}

/* A path with backslash, newline and other control bytes escaped, so the line stays one line.
   Runs of plain bytes are copied at once. */
static void put_path(line_buffer *line, const char *path) {
  const unsigned char *p = (const unsigned char *)path;
  while (*p) {
    const unsigned char *run = p;
    while (*p && *p != '\\' && *p >= 0x20 && *p != 0x7f) p++;
    if (p > run) put_text(line, (const char *)run, (size_t)(p - run));
    if (!*p) break;
    if (*p == '\\') put_text(line, "\\\\", 2);
    else { char escaped[4] = { '\\', 'x', "0123456789abcdef"[*p >> 4], "0123456789abcdef"[*p & 15] }; put_text(line, escaped, 4); }
    p++;
  }
}

/* Records wait here until the loader finishes a batch (la_activity LA_ACT_CONSISTENT) or the
   next one would not fit: one send per batch instead of one per image (each send wakes the
   reader). 4096 bytes, so every send is one unit a concurrent writer (a forked child) cannot
   split; lines never straddle two sends. */
static char pending[4096];
static size_t pending_used;

/* The CLI passes one end of a socket pair: send(MSG_NOSIGNAL) cannot raise SIGPIPE in the
   program when imagelog has gone away. Any other descriptor (a file) gets write(2). Once the
   reader is gone the module falls silent; the program goes on as if it were not there. */
static void flush_pending(void) {
  const char *cursor = pending;
  size_t left = pending_used;
  pending_used = 0;
  while (left > 0 && record_fd >= 0) {
    ssize_t written = send(record_fd, cursor, left, MSG_NOSIGNAL);
    if (written < 0 && errno == ENOTSOCK) written = write(record_fd, cursor, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) { record_fd = -1; return; }
    cursor += written;
    left -= (size_t)written;
  }
}

/* ---- the shared ring: records without a system call ---- */

/* `imagelog run` also passes a ring (IMAGELOG_AUDIT_RING, a memfd; layout in CImageLogAudit.h).
   The first process that maps it claims it and from then on copies each record into it: no send
   per batch, and what is in the ring survives a crash or _exit for imagelog to read. Forked
   children and the programs of --follow-exec keep using the socket. The writer sends one byte on
   the socket only when the reader has said it sleeps, so a batch still wakes it. */
typedef struct {
  uint64_t magic;
  uint64_t capacity;
  uint32_t owner;
  uint32_t reader_sleeping;
  uint32_t writer_waiting;
  uint32_t room_sequence;
  uint8_t pad1[64 - 32];
  uint64_t written;
  uint8_t pad2[64 - 8];
  uint64_t consumed;
} ring_header;
_Static_assert(offsetof(ring_header, written) == 64, "ring layout");
_Static_assert(offsetof(ring_header, consumed) == 128, "ring layout");
#define RING_MAGIC 0x474e495231314c49ull  /* "IL11RING", little-endian */
#define RING_DATA 4096

static ring_header *ring;
static pid_t ring_pid;

/* Maps and claims the ring at `fd`; leaves `ring` NULL when it is not one (a descriptor number
   reused for something else), or already claimed. The mapping lasts as long as the process image. */
static void attach_ring(int fd) {
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_size <= RING_DATA) return;
  uint64_t capacity = (uint64_t)info.st_size - RING_DATA;
  if ((capacity & (capacity - 1)) != 0) return;
  void *memory = mmap(NULL, (size_t)info.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (memory == MAP_FAILED) return;
  ring_header *header = memory;
  uint32_t unclaimed = 0;
  if (__atomic_load_n(&header->magic, __ATOMIC_SEQ_CST) != RING_MAGIC || header->capacity != capacity
      || !__atomic_compare_exchange_n(&header->owner, &unclaimed, (uint32_t)own_pid, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    munmap(memory, (size_t)info.st_size);
    return;
  }
  ring = header;
  ring_pid = own_pid;
}

/* One byte on the socket: wakes a sleeping reader. -1 when the reader is gone. */
static int ring_doorbell(void) {
  for (;;) {
    ssize_t sent = send(record_fd, "\n", 1, MSG_NOSIGNAL);
    if (sent == 1) return 0;
    if (sent < 0 && errno == EINTR) continue;
    return -1;
  }
}

/* The reader is gone: the module falls silent (the mapping stays; the program goes on). */
static void ring_gone(void) {
  ring = NULL;
  record_fd = -1;
}

/* Copies one record into the ring, waiting for room when it is full (as a send on a full socket
   would); -1 when the reader is gone. */
static int ring_put(const char *bytes, size_t length) {
  unsigned char *data = (unsigned char *)ring + RING_DATA;
  uint64_t capacity = ring->capacity;
  if (length > capacity) return 0;
  for (;;) {
    uint64_t written = ring->written;  /* only this process stores it */
    if (capacity - (written - __atomic_load_n(&ring->consumed, __ATOMIC_SEQ_CST)) >= length) {
      size_t start = (size_t)(written & (capacity - 1));
      size_t first = length < capacity - start ? length : (size_t)(capacity - start);
      memcpy(data + start, bytes, first);
      memcpy(data, bytes + first, length - first);
      __atomic_store_n(&ring->written, written + length, __ATOMIC_SEQ_CST);
      return 0;
    }
    uint32_t sequence = __atomic_load_n(&ring->room_sequence, __ATOMIC_SEQ_CST);
    __atomic_store_n(&ring->writer_waiting, 1, __ATOMIC_SEQ_CST);
    if (capacity - (written - __atomic_load_n(&ring->consumed, __ATOMIC_SEQ_CST)) >= length) continue;
    if (ring_doorbell() != 0) return -1;
    /* A timeout, so that a reader that died without closing the socket (stopped, then killed) is
       noticed by the next doorbell. */
    struct timespec timeout = { 0, 20 * 1000 * 1000 };
    syscall(SYS_futex, &ring->room_sequence, FUTEX_WAIT, sequence, &timeout, NULL, 0);
  }
}

/* At a flush point: wakes the reader if it sleeps. */
static void ring_flush(void) {
  if (__atomic_exchange_n(&ring->reader_sleeping, 0, __ATOMIC_SEQ_CST) != 0 && ring_doorbell() != 0) ring_gone();
}

static int owns_ring(void) { return ring != NULL && own_pid == ring_pid; }

/* Sends what is pending: the end of a batch, or the process is exiting. */
static void flush_records(void) {
  if (owns_ring()) ring_flush();
  else flush_pending();
}

static void emit(line_buffer *line) {
  line->text[line->used++] = '\n';
  if (owns_ring()) {
    if (ring_put(line->text, line->used) != 0) ring_gone();
    return;
  }
  if (line->used > sizeof pending - pending_used) flush_pending();
  memcpy(pending + pending_used, line->text, line->used);  /* line->used < sizeof line->text < 4096 */
  pending_used += line->used;
}

/* ---- the image's fields, from its program headers in memory ---- */

typedef struct {
  uint64_t bias, load_address, text_end, load_end, file_mapped_end, build_id_address;
  unsigned char build_id[64];
  size_t build_id_size;
  uint16_t machine;
  unsigned char elf_class;
} image_fields;

/* With the loader's own program headers (`in_place`): whether the `length` bytes at `vaddr`
   (unrelocated) are in the first page of the file and inside a readable PT_LOAD's file-backed part.
   The loader mapped those pages from the file (it read the ELF header from it, so the first page
   exists): reading them cannot fault. */
static int in_first_page(const ElfW(Phdr) *phdrs, size_t count, uint64_t vaddr, uint64_t length) {
  for (size_t index = 0; index < count; index++) {
    const ElfW(Phdr) *load = &phdrs[index];
    if (load->p_type != PT_LOAD || !(load->p_flags & PF_R)) continue;
    if (vaddr < load->p_vaddr || vaddr - load->p_vaddr > load->p_filesz
        || length > load->p_filesz - (vaddr - load->p_vaddr)) continue;
    uint64_t offset = load->p_offset + (vaddr - load->p_vaddr);
    if (offset >= load->p_offset && offset <= page_size && length <= page_size - offset) return 1;
  }
  return 0;
}

/* Where the ELF header (file offset 0) is mapped, unrelocated: the loader maps each PT_LOAD from
   its file offset rounded down to a page, so a readable one that starts in the first page holds it. */
static int header_vaddr(const ElfW(Phdr) *phdrs, size_t count, uint64_t *vaddr) {
  for (size_t index = 0; index < count; index++) {
    const ElfW(Phdr) *load = &phdrs[index];
    if (load->p_type != PT_LOAD || !(load->p_flags & PF_R) || load->p_offset >= page_size
        || load->p_vaddr < load->p_offset || ((load->p_vaddr - load->p_offset) & (page_size - 1)) != 0
        || (load->p_offset < sizeof(ElfW(Ehdr)) && load->p_filesz < sizeof(ElfW(Ehdr)) - load->p_offset)) continue;
    *vaddr = load->p_vaddr - load->p_offset;
    return 1;
  }
  return 0;
}

/* Copies `length` bytes at `address`: in place when `in_place`, else through safe_read. */
static int read_at(int in_place, uintptr_t address, void *buffer, size_t length) {
  if (in_place) { memcpy(buffer, (const void *)address, length); return 0; }
  return safe_read(address, buffer, length);
}

/* Reads the program headers at `phdrs` and fills the layout and build-id. `trusted`: the table is
   the loader's own (dlinfo), so it is read directly, and so is the note where in_first_page says
   it may be. */
static int describe(uintptr_t header, uintptr_t phdrs, size_t count, uint64_t bias, int trusted, image_fields *out) {
  uint64_t first = UINT64_MAX, text_end = 0, load_end = 0, file_end = 0;
  const ElfW(Phdr) *table = trusted ? (const ElfW(Phdr) *)phdrs : NULL;
  out->bias = bias;
  out->build_id_size = 0;
  out->build_id_address = 0;
  if (count > 4096) return -1;
  for (size_t index = 0; index < count; index++) {
    ElfW(Phdr) phdr;
    if (read_at(trusted, phdrs + index * sizeof phdr, &phdr, sizeof phdr) != 0) return -1;
    if (phdr.p_type == PT_LOAD) {
      uint64_t align = phdr.p_align > 1 && (phdr.p_align & (phdr.p_align - 1)) == 0 ? phdr.p_align : 1;
      uint64_t start = phdr.p_vaddr & ~(align - 1);
      uint64_t end = phdr.p_vaddr + phdr.p_memsz;
      uint64_t mapped = (phdr.p_vaddr + phdr.p_filesz + page_size - 1) & ~(uint64_t)(page_size - 1);
      if (start < first) first = start;
      if (end > load_end) load_end = end;
      if (mapped > file_end) file_end = mapped;
      if ((phdr.p_flags & PF_X) && end > text_end) text_end = end;
    } else if (phdr.p_type == PT_NOTE && out->build_id_size == 0) {
      /* Walk the notes in place: each header is read on its own, so nothing is buffered. */
      uint64_t note = bias + phdr.p_vaddr, end = note + phdr.p_memsz;
      uint64_t align = phdr.p_align == 8 ? 8 : 4;
      int in_place = trusted && in_first_page(table, count, phdr.p_vaddr, phdr.p_memsz);
      for (int step = 0; step < 256 && end - note >= sizeof(ElfW(Nhdr)); step++) {
        ElfW(Nhdr) nhdr;
        if (read_at(in_place, note, &nhdr, sizeof nhdr) != 0) break;
        uint64_t name = note + sizeof nhdr;
        uint64_t desc = name + ((nhdr.n_namesz + align - 1) & ~(align - 1));
        uint64_t next = desc + ((nhdr.n_descsz + align - 1) & ~(align - 1));
        if (next > end || next <= note) break;
        char owner[4];
        if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == 4 && nhdr.n_descsz <= sizeof out->build_id
            && read_at(in_place, name, owner, 4) == 0 && memcmp(owner, "GNU", 4) == 0
            && read_at(in_place, desc, out->build_id, nhdr.n_descsz) == 0) {
          out->build_id_size = nhdr.n_descsz;
          out->build_id_address = desc;
          break;
        }
        note = next;
      }
    }
  }
  if (first == UINT64_MAX) return -1;
  if (text_end < first) text_end = first;
  out->load_address = bias + first;
  out->text_end = bias + text_end;
  out->load_end = bias + load_end;
  out->file_mapped_end = bias + file_end;
  if (trusted) {
    uint64_t vaddr = 0;
    int found = header_vaddr(table, count, &vaddr);
    header = found ? (uintptr_t)(bias + vaddr) : out->load_address;
    ElfW(Ehdr) ehdr;
    if (read_at(found, header, &ehdr, sizeof ehdr) == 0) { out->machine = ehdr.e_machine; out->elf_class = ehdr.e_ident[EI_CLASS]; }
  } else if (header != 0) {
    ElfW(Ehdr) ehdr;
    if (safe_read(header, &ehdr, sizeof ehdr) == 0) { out->machine = ehdr.e_machine; out->elf_class = ehdr.e_ident[EI_CLASS]; }
  }
  return 0;
}

/* Finds the ELF header of a loaded object from its link map: the loader's bias is the header's
   address for the usual ET_DYN object linked at 0; otherwise look below the dynamic section for
   the header whose PT_DYNAMIC is this object's l_ld. */
static int header_and_phdrs(struct link_map *map, uintptr_t *header, uintptr_t *phdrs, size_t *count) {
  uintptr_t candidates[2] = { map->l_addr, 0 };
  int candidate_count = map->l_addr != 0 ? 1 : 0;
  for (int pass = 0; pass < 2; pass++) {
    uintptr_t limit = pass == 0 ? (uintptr_t)candidate_count : 16384;
    uintptr_t page = ((uintptr_t)map->l_ld & ~(page_size - 1));
    for (uintptr_t step = 0; step < limit; step++) {
      uintptr_t at = pass == 0 ? candidates[step] : page - step * page_size;
      if (pass == 1 && at > page) break;  /* wrapped below zero */
      ElfW(Ehdr) ehdr;
      if ((at & (page_size - 1)) != 0 || load_header_page(at) != 0) continue;
      if (safe_read(at, &ehdr, sizeof ehdr) != 0) continue;
      if (memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0 || ehdr.e_phentsize != sizeof(ElfW(Phdr))) continue;
      uintptr_t table = at + ehdr.e_phoff;
      /* Accept it when its PT_DYNAMIC, relocated by l_addr, is l_ld. */
      for (size_t index = 0; index < ehdr.e_phnum; index++) {
        ElfW(Phdr) phdr;
        if (safe_read(table + index * sizeof phdr, &phdr, sizeof phdr) != 0) break;
        if (phdr.p_type == PT_DYNAMIC && map->l_addr + phdr.p_vaddr == (uintptr_t)map->l_ld) {
          *header = at; *phdrs = table; *count = ehdr.e_phnum;
          return 0;
        }
      }
    }
  }
  return -1;
}

/* The kind is '+' (added), '-' (removed) or 'x' (removed while the process exits). */
static void report(char kind, struct link_map *map, Lmid_t lmid, uint64_t time, uint64_t duration) {
  static char executable[4096];
  image_fields fields;
  memset(&fields, 0, sizeof fields);
  uintptr_t header = 0, phdrs = 0;
  size_t count = 0;
  const char *path = map->l_name;
  int is_main = 0;
  header_page_size = 0;  /* whatever it held may have been unmapped since */
  if (map == main_map || (main_map == NULL && lmid == LM_ID_BASE && (path == NULL || path[0] == '\0')
                          && main_phdrs != 0)) {
    is_main = 1;
    main_map = map;
    if (executable[0] == '\0') {
      ssize_t length = readlink("/proc/self/exe", executable, sizeof executable - 1);
      executable[length > 0 ? length : 0] = '\0';
    }
    path = executable;
  }
  /* The loader's own table: for the executable that is AT_PHDR; for the others the one the
     loader read when it mapped the object (in the image, or its copy). */
  const ElfW(Phdr) *table = NULL;
  int trusted = 0;
  if (loader_gives_phdrs) {
    int phnum = dlinfo(map, IL_RTLD_DI_PHDR, &table);
    if (phnum > 0 && table != NULL) { trusted = 1; phdrs = (uintptr_t)table; count = (size_t)phnum; }
    else if (phnum <= 0 && table == NULL) { loader_gives_phdrs = 0; }
  }
  if (!trusted) {
    if (is_main) {
      /* The main executable: the kernel's AT_PHDR and AT_PHNUM. */
      header_page_size = 0;
      phdrs = main_phdrs;
      count = main_phnum;
    } else if (header_and_phdrs(map, &header, &phdrs, &count) != 0) {
      return;  /* not an object we can describe; say nothing rather than something wrong */
    }
  }
  if (path == NULL) path = "";
  if (describe(header, phdrs, count, map->l_addr, trusted, &fields) != 0) return;
  if (vdso_header != 0 && fields.load_address == vdso_header && !is_main) path = "[vdso]";
  if (is_main && !trusted) {
    header = fields.load_address;
    ElfW(Ehdr) ehdr;
    if (safe_read(header, &ehdr, sizeof ehdr) == 0) { fields.machine = ehdr.e_machine; fields.elf_class = ehdr.e_ident[EI_CLASS]; }
  }
  line_buffer line;
  line.used = 0;
  put_text(&line, "IL1 ", 4);
  put_char(&line, kind);
  put_char(&line, ' '); put_decimal(&line, (uint64_t)own_pid);
  put_char(&line, ' '); put_decimal(&line, time >= start_ns ? time - start_ns : 0);
  put_char(&line, ' '); put_decimal(&line, duration);
  put_char(&line, ' '); put_hex(&line, (uint64_t)lmid);
  put_char(&line, ' '); put_hex(&line, (uint64_t)(uintptr_t)map);
  put_char(&line, ' '); put_hex(&line, fields.bias);
  put_char(&line, ' '); put_hex(&line, fields.load_address);
  put_char(&line, ' '); put_hex(&line, fields.text_end);
  put_char(&line, ' '); put_hex(&line, fields.load_end);
  put_char(&line, ' '); put_hex(&line, fields.file_mapped_end);
  put_char(&line, ' ');
  if (fields.build_id_size == 0) put_char(&line, '-');
  if (fields.build_id_size != 0) {
    char digits[2 * sizeof fields.build_id];
    for (size_t index = 0; index < fields.build_id_size; index++) {
      digits[2 * index] = "0123456789abcdef"[fields.build_id[index] >> 4];
      digits[2 * index + 1] = "0123456789abcdef"[fields.build_id[index] & 15];
    }
    put_text(&line, digits, 2 * fields.build_id_size);
  }
  put_char(&line, ' '); put_hex(&line, fields.build_id_address);
  put_char(&line, ' '); put_decimal(&line, fields.machine);
  put_char(&line, ' '); put_decimal(&line, fields.elf_class == ELFCLASS32 ? 32 : 64);
  put_char(&line, ' '); put_decimal(&line, (uint64_t)is_main);
  put_char(&line, ' '); put_path(&line, path);
  emit(&line);
}

/* ---- the environment: what the CLI passed, and what the program's children must not inherit ---- */

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

/* Removes the entries starting with `prefix` from the environment, in place. */
static void drop_variable(const char *prefix) {
  size_t length = strlen(prefix);
  char **write_at = environ;
  for (char **read_at = environ; *read_at != NULL; read_at++) {
    if (strncmp(*read_at, prefix, length) != 0) *write_at++ = *read_at;
  }
  *write_at = NULL;
}

/* Always accepts the interface version: a module that returns 0 is unloaded, and glibc asserts
   (rtld.c unload_audit_module) when the module brought dependencies into its namespace, as ours
   does (the Swift runtime SwiftPM links into every product). Without IMAGELOG_AUDIT_FD the module
   stays loaded but inert. */
unsigned int la_version(unsigned int version) {
  unsigned int accepted = version < LAV_CURRENT ? version : LAV_CURRENT;
  const char *fd_text = getenv("IMAGELOG_AUDIT_FD");
  if (fd_text == NULL) return accepted;
  char *end = NULL;
  long fd = strtol(fd_text, &end, 10);
  if (end == fd_text || *end != '\0' || fd < 0 || fd > 1 << 20 || fcntl((int)fd, F_GETFD) < 0) return accepted;
  record_fd = (int)fd;
  /* Unless asked to follow exec (IMAGELOG_AUDIT_FOLLOW), exec'd programs do not inherit it. */
  if (getenv("IMAGELOG_AUDIT_FOLLOW") == NULL) fcntl(record_fd, F_SETFD, FD_CLOEXEC);
  const char *start_text = getenv("IMAGELOG_AUDIT_START_NS");
  start_ns = start_text != NULL ? strtoull(start_text, NULL, 10) : 0;
  own_pid = getpid();
  long size = sysconf(_SC_PAGESIZE);
  if (size > 0) page_size = (uintptr_t)size;
  arm_fork_page();
  main_phdrs = getauxval(AT_PHDR);
  main_phnum = getauxval(AT_PHNUM);
  vdso_header = getauxval(AT_SYSINFO_EHDR);
  const char *ring_text = getenv("IMAGELOG_AUDIT_RING");
  if (ring_text != NULL) {
    long ring_fd = strtol(ring_text, &end, 10);
    if (end != ring_text && *end == '\0' && ring_fd >= 0 && ring_fd <= 1 << 20) {
      attach_ring((int)ring_fd);
      if (ring != NULL) close((int)ring_fd);  /* the mapping is all the module needs */
    }
    /* Only this process claims it; with --follow-exec the programs it runs use the socket. */
    drop_variable("IMAGELOG_AUDIT_RING=");
  }
  const char *module_path = getenv("IMAGELOG_AUDIT_MODULE");
  if (module_path != NULL) {
    static char saved[4096];
    size_t length = strlen(module_path);
    if (length < sizeof saved) { memcpy(saved, module_path, length + 1); clean_environment(saved); }
  }
  mark_ns = now_ns();
  if (start_ns == 0) start_ns = mark_ns;
  return accepted;
}

/* The end of a batch of loads or unloads: the records go out. */
void la_activity(uintptr_t *cookie, unsigned int flag) {
  (void)cookie;
  if (record_fd < 0 || flag != LA_ACT_CONSISTENT) return;
  current_pid();
  flush_records();
}

/* Called with LA_SER_ORIG when the loader starts looking for an object by the name it was asked
   for (before each search-path candidate); the name is returned unchanged. */
char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag) {
  (void)cookie;
  if (record_fd >= 0 && flag == LA_SER_ORIG) mark_ns = now_ns();
  return (char *)name;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie) {
  (void)cookie;
  if (record_fd < 0) return 0;
  current_pid();  /* a forked child: its records carry its own pid */
  uint64_t time = now_ns();
  report('+', map, lmid, time, time >= mark_ns ? time - mark_ns : 0);
  mark_ns = now_ns();  /* the next object's step starts after our own work */
  return 0;  /* no LA_FLG_BINDTO/BINDFROM: symbol binding is not audited, so no PLT trampolines */
}

/* The loader starts each cookie as the object's link map (and we never change it). The object is
   still mapped here, so the record carries the same fields as its add. */
unsigned int la_objclose(uintptr_t *cookie) {
  if (record_fd < 0 || cookie == NULL) return 0;
  struct link_map *map = (struct link_map *)*cookie;
  /* _dl_fini closes the main executable first: from then on the process is exiting, and the
     images are not being unloaded in any sense a reader of the log cares about. One 'x' record
     marks the moment; describing every image again would only slow the exit down. */
  if (exiting) return 0;
  current_pid();
  if (map == main_map) exiting = 1;
  report(exiting ? 'x' : '-', map, LM_ID_BASE, now_ns(), 0);
  if (exiting) flush_records();  /* no LA_ACT_CONSISTENT will follow */
  return 0;
}
