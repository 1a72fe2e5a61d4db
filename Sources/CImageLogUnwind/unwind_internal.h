/* What the unwinder's C files share: its limits, the DW_EH_PE_* encodings, and reading the unwound
   process through il_memory (a cursor with read-ahead, LEB128, encoded pointers). Private to
   CImageLogUnwind; async-signal-safe as the rest (no libc but memcpy/memset). */
#ifndef IL_UNWIND_INTERNAL_H
#define IL_UNWIND_INTERNAL_H
#include "CImageLogUnwind.h"
#include <string.h>

enum {
  CACHE_SIZE = 256,                 /* bytes one il_memory read fetches ahead in a section */
  MAX_INSTRUCTIONS = 1 << 16,       /* DW_CFA_* instructions run for one row (CIE's and FDE's together) */
  MAX_EXPRESSION_STEPS = 1024,      /* DWARF expression operations for one value (bra can loop) */
  EXPRESSION_STACK = 64,
  MAX_LINEAR_ENTRIES = 1 << 20,     /* entries one walk of .eh_frame / .debug_frame visits */
  MAX_SEARCH_PROBES = 64,           /* .eh_frame_hdr binary search: log2 of any count fits */
  MAX_STEPS = 4096,                 /* frames one cursor walks */
  MAX_AUGMENTATION = 16,
};

/* DW_EH_PE_* */
enum {
  PE_ABSPTR = 0x00, PE_ULEB128 = 0x01, PE_UDATA2 = 0x02, PE_UDATA4 = 0x03, PE_UDATA8 = 0x04,
  PE_SIGNED = 0x08, PE_SLEB128 = 0x09, PE_SDATA2 = 0x0A, PE_SDATA4 = 0x0B, PE_SDATA8 = 0x0C,
  PE_PCREL = 0x10, PE_TEXTREL = 0x20, PE_DATAREL = 0x30, PE_FUNCREL = 0x40, PE_ALIGNED = 0x50,
  PE_INDIRECT = 0x80, PE_OMIT = 0xFF,
};

/* ------------------------------------------------------------------ reading through il_memory */

/* A cursor over [position, end) in the unwound process, with a small read-ahead window: walking a
   section byte by byte must not cost one il_memory call (a process_vm_readv) per byte. */
typedef struct {
  const il_memory *memory;
  uint64_t position, end;
  int failed;
  uint64_t cache_address;
  uint64_t cache_length;
  uint8_t cache[CACHE_SIZE];
} reader;

static inline void reader_init(reader *r, const il_memory *memory, uint64_t start, uint64_t end) {
  r->memory = memory;
  r->position = start;
  r->end = end;
  r->failed = 0;
  r->cache_length = 0;
  r->cache_address = 0;
}

static inline int memory_read(const il_memory *memory, uint64_t address, void *out, size_t length) {
  if (memory == NULL || memory->read == NULL) return 0;
  if (length > 0 && address + (length - 1) < address) return 0;  /* wraps past the top */
  return memory->read(memory->context, address, out, length);
}

/* Copies `length` bytes at r->position, inside [.., end), and advances. */
static inline int reader_bytes(reader *r, void *out, uint64_t length) {
  if (r->failed) return 0;
  if (r->position > r->end || length > r->end - r->position) { r->failed = 1; return 0; }
  uint64_t at = r->position;
  if (!(r->cache_length > 0 && at >= r->cache_address && length <= r->cache_length &&
        at - r->cache_address <= r->cache_length - length)) {
    if (length > CACHE_SIZE) {
      if (!memory_read(r->memory, at, out, (size_t)length)) { r->failed = 1; return 0; }
      r->position += length;
      return 1;
    }
    uint64_t window = r->end - at < CACHE_SIZE ? r->end - at : CACHE_SIZE;
    if (memory_read(r->memory, at, r->cache, (size_t)window)) {
      r->cache_address = at;
      r->cache_length = window;
    } else if (memory_read(r->memory, at, r->cache, (size_t)length)) {  /* the window crosses unreadable memory */
      r->cache_address = at;
      r->cache_length = length;
    } else {
      r->failed = 1;
      return 0;
    }
  }
  memcpy(out, r->cache + (at - r->cache_address), (size_t)length);
  r->position += length;
  return 1;
}

static inline uint64_t little_endian(const uint8_t *bytes, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; i--) value = value << 8 | bytes[i];
  return value;
}

static inline uint64_t read_unsigned(reader *r, int size) {
  uint8_t bytes[8];
  if (!reader_bytes(r, bytes, (uint64_t)size)) return 0;
  return little_endian(bytes, size);
}

static inline int64_t read_signed(reader *r, int size) {
  uint64_t value = read_unsigned(r, size);
  if (size < 8) {
    unsigned shift = (unsigned)(64 - 8 * size);
    return (int64_t)(value << shift) >> shift;
  }
  return (int64_t)value;
}

static inline uint8_t read_u8(reader *r) { return (uint8_t)read_unsigned(r, 1); }

static inline uint64_t read_uleb(reader *r) {
  uint64_t value = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    uint8_t byte = read_u8(r);
    if (r->failed) return 0;
    if (shift < 64) value |= (uint64_t)(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return value;
  }
  r->failed = 1;  /* longer than any 64-bit value */
  return 0;
}

static inline int64_t read_sleb(reader *r) {
  uint64_t value = 0;
  unsigned shift = 0;
  uint8_t byte = 0x80;
  while (shift < 70) {
    byte = read_u8(r);
    if (r->failed) return 0;
    if (shift < 64) value |= (uint64_t)(byte & 0x7F) << shift;
    shift += 7;
    if (!(byte & 0x80)) break;
  }
  if (byte & 0x80) { r->failed = 1; return 0; }
  if (shift < 64 && (byte & 0x40)) value |= ~(uint64_t)0 << shift;
  return (int64_t)value;
}

/* A pointer of `size` bytes (8, or 4 in a 32-bit process). */
static inline int read_pointer(const il_memory *memory, uint64_t address, int size, uint64_t *out) {
  uint8_t bytes[8];
  if (!memory_read(memory, address, bytes, (size_t)size)) return 0;
  *out = little_endian(bytes, size);
  return 1;
}

/* A value cut to the address size: 32-bit sums wrap as the 32-bit process's own do. */
static inline uint64_t wrap(uint64_t value, int size) { return size == 4 ? value & 0xFFFFFFFFu : value; }

/* A value of the address size read as signed. */
static inline int64_t as_signed(uint64_t value, int size) { return size == 4 ? (int64_t)(int32_t)(uint32_t)value : (int64_t)value; }

/* A register's value when `registers` knows it. */
static inline int register_value(const il_register_set *registers, uint64_t reg, uint64_t *out) {
  if (reg >= IL_REGISTER_COUNT || !(registers->known & (1ull << reg))) return 0;
  *out = registers->value[reg];
  return 1;
}

/* il_cfi_find_row, also giving the section the row was read from (its memory holds the rules'
   expressions). */
int il_cfi_find_section_row(const il_memory *memory, const il_unwind_image *image, uint64_t pc, il_cfi_row *row,
                            il_cfi_section *section);

#endif
