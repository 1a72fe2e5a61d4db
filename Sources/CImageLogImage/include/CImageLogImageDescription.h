#ifndef CIMAGELOGIMAGEDESCRIPTION_H
#define CIMAGELOGIMAGEDESCRIPTION_H
/* One loaded image, described from the program headers its loader mapped it by: the span of its
   segments, its mapped notes, its GNU build-id (CImageLogImageLine.h writes the line). Header-only
   (static inline), so each user compiles its own copy and links nothing: the audit module (which
   must not bring the rest of the shim into every audited program), the shim's snapshot walk
   (objects.c) and the tests that hold it against the Swift LoadLayout and build-id walk. No
   allocation, no stdio, no locks, no errno: usable from the loader's audit hooks and at crash time. */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The span of a loaded object's PT_LOAD segments. Link-time addresses except `file_end`. */
typedef struct {
  uint64_t first_vaddr;     /* the lowest PT_LOAD p_vaddr rounded down to its p_align (a power of two, else 1) */
  uint64_t text_end_vaddr;  /* the highest p_vaddr + p_memsz of an executable PT_LOAD, at least first_vaddr */
  uint64_t load_end_vaddr;  /* the highest p_vaddr + p_memsz of any PT_LOAD */
  uint64_t file_end;        /* load_bias + the highest p_vaddr + p_filesz (rounded up to page_size) of a
                               PT_LOAD with file bytes, at least load_bias + first_vaddr; modulo 2^64.
                               A PT_LOAD with p_filesz 0 (all zero-fill) maps nothing from the file,
                               so it adds nothing: the end eu-unstrip takes from /proc/PID/maps. */
} il_layout;

/* Fills `layout` from `count` program headers; returns 0 (layout unset) when there is no PT_LOAD,
   or a PT_LOAD's p_vaddr + p_memsz overflows 64 bits. A PT_LOAD whose p_vaddr + p_filesz overflows
   adds nothing to file_end; a rounding that would overflow is left unrounded. */
static inline int il_image_layout(const ElfW(Phdr) *headers, size_t count, uint64_t load_bias,
                                  uint64_t page_size, il_layout *layout) {
  if (headers == NULL) return 0;
  int found = 0;
  uint64_t first = 0, text_end = 0, load_end = 0;
  for (size_t index = 0; index < count; index++) {
    const ElfW(Phdr) *header = &headers[index];
    if (header->p_type != PT_LOAD) continue;
    uint64_t vaddr = header->p_vaddr, end;
    if (__builtin_add_overflow(vaddr, (uint64_t)header->p_memsz, &end)) return 0;
    uint64_t align = header->p_align;
    if (align <= 1 || (align & (align - 1)) != 0) align = 1;
    uint64_t start = vaddr & ~(align - 1);
    if (!found || start < first) first = start;
    found = 1;
    if (end > load_end) load_end = end;
    if ((header->p_flags & PF_X) && end > text_end) text_end = end;
  }
  if (!found) return 0;
  uint64_t mask = page_size - 1;
  uint64_t file_end = load_bias + first;  /* addresses wrap as the loader's do: the bias is modulo 2^64 */
  for (size_t index = 0; index < count; index++) {
    const ElfW(Phdr) *header = &headers[index];
    if (header->p_type != PT_LOAD || header->p_filesz == 0) continue;
    uint64_t end, rounded;
    if (__builtin_add_overflow((uint64_t)header->p_vaddr, (uint64_t)header->p_filesz, &end)) continue;
    if (__builtin_add_overflow(end, mask, &rounded)) rounded = end;
    else rounded &= ~mask;
    if (load_bias + rounded > file_end) file_end = load_bias + rounded;
  }
  layout->first_vaddr = first;
  layout->text_end_vaddr = text_end > first ? text_end : first;
  layout->load_end_vaddr = load_end;
  layout->file_end = file_end;
  return 1;
}

/* A PT_NOTE segment whose bytes are mapped: inside the file-backed part of a PT_LOAD. */
typedef struct {
  uint64_t address;   /* load_bias + p_vaddr, never 0 */
  size_t size;        /* p_filesz, > 0 */
  size_t alignment;   /* 8 when p_align is 8, else 4 (as notes are read) */
} il_note_area;

/* The next mapped PT_NOTE at or after program header `*index`, in header order; advances `*index`
   past it. Returns 0 when there is none left. Skips a PT_NOTE that is empty, whose end overflows,
   larger than INTPTR_MAX, or that no PT_LOAD's file bytes (p_vaddr..p_vaddr + p_filesz, not
   wrapping) contain. */
static inline int il_image_next_note(const ElfW(Phdr) *headers, size_t count, uint64_t load_bias,
                                     size_t *index, il_note_area *note) {
  if (headers == NULL) return 0;
  while (*index < count) {
    const ElfW(Phdr) *candidate = &headers[(*index)++];
    if (candidate->p_type != PT_NOTE || candidate->p_filesz == 0) continue;
    uint64_t start = candidate->p_vaddr, size = candidate->p_filesz, end;
    if (__builtin_add_overflow(start, size, &end) || size > (uint64_t)INTPTR_MAX) continue;
    int mapped = 0;
    for (size_t load = 0; load < count && !mapped; load++) {
      const ElfW(Phdr) *segment = &headers[load];
      uint64_t file_end;
      if (segment->p_type != PT_LOAD) continue;
      if (__builtin_add_overflow((uint64_t)segment->p_vaddr, (uint64_t)segment->p_filesz, &file_end)) continue;
      mapped = segment->p_vaddr <= start && end <= file_end;
    }
    uint64_t address = load_bias + start;
    if (!mapped || (uintptr_t)address == 0) continue;
    note->address = address;
    note->size = (size_t)size;
    note->alignment = candidate->p_align == 8 ? 8 : 4;
    return 1;
  }
  return 0;
}

/* The GNU build-id in a note area of `size` bytes: the same walk as LoaderImageBuilder.buildIDNote
   (12-byte headers; name and descriptor padded to `alignment`; owner "GNU" with or without its NUL;
   every size checked against what is left). Returns 1 and the descriptor's offset and size when the
   area has a non-empty one; 0 when it has none or the walk meets a malformed note. */
static inline int il_image_build_id(const unsigned char *area, size_t size, size_t alignment,
                                    size_t *descriptor_offset, size_t *descriptor_size) {
  size_t offset = 0;
  while (size - offset >= 12) {
    uint32_t name_size, desc_size, type;
    memcpy(&name_size, area + offset, 4);
    memcpy(&desc_size, area + offset + 4, 4);
    memcpy(&type, area + offset + 8, 4);
    size_t name_start = offset + 12;
    if (name_size > size - name_start) return 0;
    int is_gnu = (name_size >= 4 && memcmp(area + name_start, "GNU", 4) == 0)
                 || (name_size == 3 && memcmp(area + name_start, "GNU", 3) == 0);
    size_t desc_start = (name_start + name_size + alignment - 1) & ~(alignment - 1);
    if (desc_start > size) desc_start = size;
    if (desc_size > size - desc_start) return 0;
    if (is_gnu && type == NT_GNU_BUILD_ID && desc_size > 0) {
      *descriptor_offset = desc_start;
      *descriptor_size = desc_size;
      return 1;
    }
    size_t next = (desc_start + desc_size + alignment - 1) & ~(alignment - 1);
    if (next > size) return 0;
    offset = next;
  }
  return 0;
}

/* What a line shows of an image. Strings and bytes are borrowed. */
typedef struct {
  const char *path;              /* NUL-terminated: the executable's real path, the loader's name, "[vdso]" */
  const char *architecture;      /* "x86_64", ... */
  uint64_t load_bias;
  uint64_t load_address;         /* load_bias + first_vaddr */
  uint64_t text_end;             /* exclusive */
  uint64_t load_end;             /* exclusive */
  uint64_t file_mapped_end;      /* exclusive, at least load_address */
  const unsigned char *build_id; /* NULL when none */
  size_t build_id_size;          /* 0 when none */
  uint64_t build_id_address;     /* where the build-id bytes are mapped, 0 when none */
  int is_main;
} il_image;

/* Describes a loaded object from the program headers it was mapped by; its notes are read in place
   (only those il_image_next_note says are mapped). Returns 0 when il_image_layout refuses it. */
static inline int il_image_describe(const ElfW(Phdr) *headers, size_t count, uint64_t load_bias,
                                    uint64_t page_size, il_image *image) {
  il_layout layout;
  if (!il_image_layout(headers, count, load_bias, page_size, &layout)) return 0;
  image->load_bias = load_bias;
  image->load_address = load_bias + layout.first_vaddr;
  image->text_end = load_bias + layout.text_end_vaddr;
  image->load_end = load_bias + layout.load_end_vaddr;
  if (image->text_end < image->load_address || image->load_end < image->load_address) return 0;
  image->file_mapped_end = layout.file_end > image->load_address ? layout.file_end : image->load_address;
  image->build_id = NULL;
  image->build_id_size = 0;
  image->build_id_address = 0;
  size_t index = 0;
  il_note_area note;
  while (il_image_next_note(headers, count, load_bias, &index, &note)) {
    size_t offset = 0, length = 0;
    const unsigned char *area = (const unsigned char *)(uintptr_t)note.address;
    if (il_image_build_id(area, note.size, note.alignment, &offset, &length)) {
      image->build_id = area + offset;
      image->build_id_size = length;
      image->build_id_address = note.address + offset;
      break;
    }
  }
  return 1;
}

/* The architecture name ImageFormatter prints for this build's own images. */
static inline const char *il_native_architecture(void) {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "arm64";
#elif defined(__i386__)
  return "i386";
#elif defined(__arm__)
  return "arm";
#elif defined(__riscv) && __riscv_xlen == 64
  return "riscv64";
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
  return "ppc64le";
#elif defined(__s390x__)
  return "s390x";
#else
  return "unknown";
#endif
}
#endif
