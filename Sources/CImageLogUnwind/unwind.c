/* The one stack unwinder: call frame information (.eh_frame_hdr / .eh_frame / .debug_frame), then frame
   pointers, then stack scanning. See CImageLogUnwind.h for the contract.

   Async-signal-safe: no allocation, no locks, no errno, no libc but memcpy/memset; every byte of the
   unwound process comes through il_memory; every loop has a bound that does not depend on the data
   (instruction, expression-step, entry and step caps); nothing recurses. Any malformed byte makes the
   method in use give up for this frame (the next method, or the end of the stack), never a fault. */
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

static void reader_init(reader *r, const il_memory *memory, uint64_t start, uint64_t end) {
  r->memory = memory;
  r->position = start;
  r->end = end;
  r->failed = 0;
  r->cache_length = 0;
  r->cache_address = 0;
}

static int memory_read(const il_memory *memory, uint64_t address, void *out, size_t length) {
  if (memory == NULL || memory->read == NULL) return 0;
  if (length > 0 && address + (length - 1) < address) return 0;  /* wraps past the top */
  return memory->read(memory->context, address, out, length);
}

/* Copies `length` bytes at r->position, inside [.., end), and advances. */
static int reader_bytes(reader *r, void *out, uint64_t length) {
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

static uint64_t little_endian(const uint8_t *bytes, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; i--) value = value << 8 | bytes[i];
  return value;
}

static uint64_t read_unsigned(reader *r, int size) {
  uint8_t bytes[8];
  if (!reader_bytes(r, bytes, (uint64_t)size)) return 0;
  return little_endian(bytes, size);
}

static int64_t read_signed(reader *r, int size) {
  uint64_t value = read_unsigned(r, size);
  if (size < 8) {
    unsigned shift = (unsigned)(64 - 8 * size);
    return (int64_t)(value << shift) >> shift;
  }
  return (int64_t)value;
}

static uint8_t read_u8(reader *r) { return (uint8_t)read_unsigned(r, 1); }

static uint64_t read_uleb(reader *r) {
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

static int64_t read_sleb(reader *r) {
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
static int read_pointer(const il_memory *memory, uint64_t address, int size, uint64_t *out) {
  uint8_t bytes[8];
  if (!memory_read(memory, address, bytes, (size_t)size)) return 0;
  *out = little_endian(bytes, size);
  return 1;
}

/* A value cut to the address size: 32-bit sums wrap as the 32-bit process's own do. */
static uint64_t wrap(uint64_t value, int size) { return size == 4 ? value & 0xFFFFFFFFu : value; }

/* A value of the address size read as signed. */
static int64_t as_signed(uint64_t value, int size) { return size == 4 ? (int64_t)(int32_t)(uint32_t)value : (int64_t)value; }

/* What DW_EH_PE_* bases are: 0 means unknown (an encoding that needs it fails). */
typedef struct {
  uint64_t data;       /* datarel: .eh_frame_hdr's start for its own fields */
  uint64_t function;   /* funcrel: the FDE's initial location */
} pointer_bases;

/* Reads a DW_EH_PE_* encoded pointer. Sums wrap (as libgcc's), then are cut to the address size. */
static uint64_t read_encoded(reader *r, uint8_t encoding, int address_size, const pointer_bases *bases) {
  if (encoding == PE_OMIT) { r->failed = 1; return 0; }
  if ((encoding & 0x70) == PE_ALIGNED) {
    uint64_t mask = (uint64_t)address_size - 1;
    uint64_t aligned = (r->position + mask) & ~mask;
    if (aligned < r->position) { r->failed = 1; return 0; }
    r->position = aligned;
  }
  uint64_t field = r->position;
  uint64_t value;
  switch (encoding & 0x0F) {
  case PE_ABSPTR: value = read_unsigned(r, address_size); break;
  case PE_ULEB128: value = read_uleb(r); break;
  case PE_UDATA2: value = read_unsigned(r, 2); break;
  case PE_UDATA4: value = read_unsigned(r, 4); break;
  case PE_UDATA8: value = read_unsigned(r, 8); break;
  case PE_SIGNED: value = (uint64_t)read_signed(r, address_size); break;
  case PE_SLEB128: value = (uint64_t)read_sleb(r); break;
  case PE_SDATA2: value = (uint64_t)read_signed(r, 2); break;
  case PE_SDATA4: value = (uint64_t)read_signed(r, 4); break;
  case PE_SDATA8: value = (uint64_t)read_signed(r, 8); break;
  default: r->failed = 1; return 0;
  }
  switch (encoding & 0x70) {
  case PE_ABSPTR: case PE_ALIGNED: break;
  case PE_PCREL: value += field; break;
  case PE_DATAREL:
    if (bases == NULL || bases->data == 0) { r->failed = 1; return 0; }
    value += bases->data;
    break;
  case PE_FUNCREL:
    if (bases == NULL || bases->function == 0) { r->failed = 1; return 0; }
    value += bases->function;
    break;
  default: r->failed = 1; return 0;  /* textrel: no unwinder on Linux knows .text's base either */
  }
  if (address_size == 4) value &= 0xFFFFFFFFu;
  if (encoding & PE_INDIRECT) {
    uint64_t target;
    if (r->failed || !read_pointer(r->memory, value, address_size == 4 ? 4 : 8, &target)) { r->failed = 1; return 0; }
    value = target;
  }
  return r->failed ? 0 : value;
}

/* The size of a fixed-size DW_EH_PE_* value, 0 for a variable one. */
static int encoded_size(uint8_t encoding, int address_size) {
  switch (encoding & 0x0F) {
  case PE_ABSPTR: case PE_SIGNED: return address_size;
  case PE_UDATA2: case PE_SDATA2: return 2;
  case PE_UDATA4: case PE_SDATA4: return 4;
  case PE_UDATA8: case PE_SDATA8: return 8;
  default: return 0;
  }
}

/* ------------------------------------------------------------------ CIEs and FDEs */

typedef struct {
  uint64_t code_align;
  int64_t data_align;
  uint64_t return_address;
  uint8_t fde_encoding, lsda_encoding, address_size, signal_frame, augmented;
  uint64_t instructions, end;
} cie_info;

typedef struct {
  uint64_t start, end;        /* the entry's bytes, length field first */
  uint64_t body, body_end;    /* after the id field .. end */
  uint64_t id, id_position;
  int is64;
  int terminator;
} entry_header;

/* The entry header at `address`, inside the section ending at `end`. */
static int read_header(const il_cfi_section *s, uint64_t address, uint64_t end, entry_header *h) {
  reader r;
  reader_init(&r, s->memory, address, end);
  uint64_t length = read_unsigned(&r, 4);
  h->is64 = 0;
  h->terminator = 0;
  if (r.failed) return 0;
  if (length == 0xFFFFFFFFu) {
    length = read_unsigned(&r, 8);
    h->is64 = 1;
  } else if (length >= 0xFFFFFFF0u) {
    return 0;  /* reserved */
  }
  if (r.failed) return 0;
  h->start = address;
  if (length == 0) { h->terminator = 1; h->end = r.position; return 1; }
  if (length > end - r.position) return 0;
  h->end = r.position + length;
  h->id_position = r.position;
  if (length < (uint64_t)(h->is64 ? 8 : 4)) return 0;
  h->id = read_unsigned(&r, h->is64 ? 8 : 4);
  h->body = r.position;
  h->body_end = h->end;
  return !r.failed;
}

static int is_cie(const il_cfi_section *s, const entry_header *h) {
  if (!s->debug_frame) return h->id == 0;
  return h->id == (h->is64 ? ~(uint64_t)0 : 0xFFFFFFFFu);
}

static int parse_cie(const il_cfi_section *s, const entry_header *h, cie_info *cie) {
  reader r;
  reader_init(&r, s->memory, h->body, h->body_end);
  uint8_t version = read_u8(&r);
  if (r.failed || !(version == 1 || version == 3 || version == 4)) return 0;
  char augmentation[MAX_AUGMENTATION + 1];
  int length = 0;
  for (;;) {
    uint8_t c = read_u8(&r);
    if (r.failed) return 0;
    if (c == 0) break;
    if (length == MAX_AUGMENTATION) return 0;
    augmentation[length++] = (char)c;
  }
  augmentation[length] = 0;
  memset(cie, 0, sizeof *cie);
  cie->address_size = s->address_size;
  cie->fde_encoding = PE_ABSPTR;
  cie->lsda_encoding = PE_OMIT;
  if (length >= 2 && augmentation[0] == 'e' && augmentation[1] == 'h') {
    r.position += cie->address_size;  /* GCC 2's eh_ptr */
  }
  if (version == 4) {
    uint8_t size = read_u8(&r), segment = read_u8(&r);
    if (r.failed || !(size == 4 || size == 8) || segment != 0) return 0;
    cie->address_size = size;
  }
  cie->code_align = read_uleb(&r);
  cie->data_align = read_sleb(&r);
  cie->return_address = version == 1 ? read_u8(&r) : read_uleb(&r);
  if (r.failed) return 0;
  if (augmentation[0] == 'z') {
    cie->augmented = 1;
    uint64_t data_length = read_uleb(&r);
    if (r.failed || data_length > r.end - r.position) return 0;
    uint64_t data_end = r.position + data_length;
    reader data = r;
    data.end = data_end;
    for (int i = 1; i < length; i++) {
      char letter = augmentation[i];
      if (letter == 'R') cie->fde_encoding = read_u8(&data);
      else if (letter == 'L') cie->lsda_encoding = read_u8(&data);
      else if (letter == 'P') {
        uint8_t encoding = read_u8(&data);
        /* The personality's value is not needed: read only its format to move past it (its base and
           an indirection would need bases and memory for nothing). */
        uint8_t format = (uint8_t)(encoding & 0x0F);
        if ((encoding & 0x70) == PE_ALIGNED) format |= PE_ALIGNED;
        (void)read_encoded(&data, format, cie->address_size, NULL);
      } else if (letter == 'S') cie->signal_frame = 1;
      else if (letter == 'B' || letter == 'G') continue;  /* aarch64 BTI / MTE: no data */
      else break;  /* unknown: the length still says where the data ends */
      if (data.failed) return 0;
    }
    r.position = data_end;
  } else if (length == 1 && augmentation[0] == 'S') {
    cie->signal_frame = 1;  /* GAS's .cfi_signal_frame in .debug_frame, where there is no 'z' */
  } else if (length != 0 && !(length == 2 && augmentation[0] == 'e' && augmentation[1] == 'h')) {
    return 0;
  }
  cie->instructions = r.position;
  cie->end = h->end;
  return cie->instructions <= cie->end;
}

/* The CIE an FDE names (never another FDE: no chains). */
static int fde_cie(const il_cfi_section *s, const entry_header *h, cie_info *cie, uint64_t *cie_address) {
  uint64_t address;
  uint64_t section_end = s->address + s->size;
  if (!s->debug_frame) {
    if (h->id > h->id_position - s->address) return 0;  /* points before the section */
    address = h->id_position - h->id;
  } else {
    if (h->id >= s->size) return 0;
    address = s->address + h->id;
  }
  entry_header ch;
  if (!read_header(s, address, section_end, &ch) || ch.terminator || !is_cie(s, &ch)) return 0;
  *cie_address = address;
  return parse_cie(s, &ch, cie);
}

static int parse_fde(const il_cfi_section *s, const entry_header *h, const cie_info *cie, il_cfi_fde *fde) {
  reader r;
  reader_init(&r, s->memory, h->body, h->body_end);
  uint64_t start, range;
  if (!s->debug_frame) {
    start = read_encoded(&r, cie->fde_encoding, cie->address_size, NULL);
    range = read_encoded(&r, cie->fde_encoding & 0x0F, cie->address_size, NULL);
  } else {
    start = read_unsigned(&r, cie->address_size) + s->load_bias;
    range = read_unsigned(&r, cie->address_size);
  }
  if (cie->augmented) {
    uint64_t length = read_uleb(&r);
    if (r.failed || length > r.end - r.position) return 0;
    r.position += length;
  }
  if (r.failed) return 0;
  fde->offset = h->start - s->address;
  fde->pc_start = start;
  fde->pc_end = start + range < start ? ~(uint64_t)0 : start + range;
  fde->instructions = r.position;
  fde->instructions_end = h->end;
  return 1;
}

int il_cfi_next_entry(const il_cfi_section *section, uint64_t *offset, il_cfi_fde *fde) {
  for (int padding = 0; padding < MAX_LINEAR_ENTRIES; padding++) {
    if (*offset >= section->size) return 0;
    entry_header h;
    if (!read_header(section, section->address + *offset, section->address + section->size, &h)) return -1;
    *offset = h.end - section->address;
    if (h.terminator) {
      if (!section->debug_frame) return 0;
      continue;  /* .debug_frame: padding readelf steps over */
    }
    if (is_cie(section, &h)) {
      cie_info cie;
      return parse_cie(section, &h, &cie) ? 2 : -1;
    }
    cie_info cie;
    uint64_t cie_address;
    if (!fde_cie(section, &h, &cie, &cie_address) || !parse_fde(section, &h, &cie, fde)) return -1;
    fde->cie = cie_address;
    return 1;
  }
  return -1;
}

/* ------------------------------------------------------------------ DW_CFA_* */

typedef struct {
  il_cfi_rule cfa;
  int64_t cfa_offset;
  uint8_t ra_signed;
  il_cfi_rule rules[IL_CFI_COLUMNS];
} rule_state;

/* The remembered states and the CIE's initial rules: on the caller's stack, sized by the header's caps. */
typedef struct {
  rule_state initial;
  rule_state saved[IL_CFI_STATE_DEPTH];
  int depth;
} run_state;

static void set_rule(rule_state *state, uint64_t column, uint8_t kind, int64_t value, uint32_t length) {
  if (column >= IL_CFI_COLUMNS) return;  /* a column no register set holds */
  state->rules[column].kind = kind;
  state->rules[column].value = value;
  state->rules[column].length = length;
}

static int factored(int64_t value, int64_t factor, int64_t *out) {
  return !__builtin_mul_overflow(value, factor, out);
}

/* Runs the instructions in [start, end). With `initial` NULL (a CIE's instructions) advancing and
   restoring are malformed. Stops, returning 2, when the next row starts past `pc` (then *next is
   that row's location, and *resume, when given, the address of the instruction after the advance);
   returns 1 at the end of the instructions, 0 when malformed. */
static int run_instructions(const il_cfi_section *s, const cie_info *cie, const il_cfi_fde *fde, uint64_t start,
                            uint64_t end, rule_state *row, uint64_t *location, run_state *states, int is_cie_program,
                            uint64_t pc, uint64_t *next, uint64_t *resume, int *budget) {
  reader r;
  reader_init(&r, s->memory, start, end);
  pointer_bases bases = {.data = 0, .function = fde->pc_start};
  while (r.position < r.end) {
    if (--*budget < 0) return 0;
    uint8_t opcode = read_u8(&r);
    if (r.failed) return 0;
    uint64_t advance = 0, new_location = 0;
    int advancing = 0;
    uint8_t high = opcode & 0xC0, low = opcode & 0x3F;
    if (high == 0x40) {
      advance = low;
      advancing = 1;
    } else if (high == 0x80) {
      int64_t offset;
      uint64_t factor = read_uleb(&r);
      if (r.failed || !factored((int64_t)factor, cie->data_align, &offset)) return 0;
      set_rule(row, low, IL_RULE_OFFSET, offset, 0);
      continue;
    } else if (high == 0xC0) {
      if (is_cie_program) return 0;
      if (low < IL_CFI_COLUMNS) row->rules[low] = states->initial.rules[low];
      continue;
    } else {
      uint64_t reg, value;
      int64_t offset;
      switch (opcode) {
      case 0x00: break;  /* nop */
      case 0x01:         /* set_loc */
        if (!s->debug_frame) new_location = read_encoded(&r, cie->fde_encoding, cie->address_size, &bases);
        else new_location = read_unsigned(&r, cie->address_size) + s->load_bias;
        if (r.failed || new_location < *location) return 0;
        advancing = 2;
        break;
      case 0x02: advance = read_unsigned(&r, 1); advancing = 1; break;
      case 0x03: advance = read_unsigned(&r, 2); advancing = 1; break;
      case 0x04: advance = read_unsigned(&r, 4); advancing = 1; break;
      case 0x05:  /* offset_extended */
        reg = read_uleb(&r);
        value = read_uleb(&r);
        if (r.failed || !factored((int64_t)value, cie->data_align, &offset)) return 0;
        set_rule(row, reg, IL_RULE_OFFSET, offset, 0);
        break;
      case 0x06:  /* restore_extended */
        reg = read_uleb(&r);
        if (r.failed || is_cie_program) return 0;
        if (reg < IL_CFI_COLUMNS) row->rules[reg] = states->initial.rules[reg];
        break;
      case 0x07: reg = read_uleb(&r); set_rule(row, reg, IL_RULE_UNDEFINED, 0, 0); break;
      case 0x08: reg = read_uleb(&r); set_rule(row, reg, IL_RULE_SAME_VALUE, 0, 0); break;
      case 0x09:  /* register */
        reg = read_uleb(&r);
        value = read_uleb(&r);
        set_rule(row, reg, IL_RULE_REGISTER, (int64_t)value, 0);
        break;
      case 0x0A:  /* remember_state */
        if (states->depth >= IL_CFI_STATE_DEPTH) return 0;
        states->saved[states->depth++] = *row;
        break;
      case 0x0B:  /* restore_state: the rules come back, the location stays */
        if (states->depth == 0) return 0;
        *row = states->saved[--states->depth];
        break;
      case 0x0C:  /* def_cfa */
        reg = read_uleb(&r);
        value = read_uleb(&r);
        row->cfa = (il_cfi_rule){.kind = IL_RULE_REGISTER, .value = (int64_t)reg};
        row->cfa_offset = (int64_t)value;
        break;
      case 0x0D:  /* def_cfa_register */
        reg = read_uleb(&r);
        if (row->cfa.kind != IL_RULE_REGISTER) return 0;
        row->cfa.value = (int64_t)reg;
        break;
      case 0x0E:  /* def_cfa_offset */
        value = read_uleb(&r);
        if (row->cfa.kind != IL_RULE_REGISTER) return 0;
        row->cfa_offset = (int64_t)value;
        break;
      case 0x0F: {  /* def_cfa_expression */
        uint64_t length = read_uleb(&r);
        if (r.failed || length > r.end - r.position || length > UINT32_MAX) return 0;
        row->cfa = (il_cfi_rule){.kind = IL_RULE_VAL_EXPRESSION, .value = (int64_t)r.position, .length = (uint32_t)length};
        row->cfa_offset = 0;
        r.position += length;
        break;
      }
      case 0x10: case 0x16: {  /* expression, val_expression */
        reg = read_uleb(&r);
        uint64_t length = read_uleb(&r);
        if (r.failed || length > r.end - r.position || length > UINT32_MAX) return 0;
        set_rule(row, reg, opcode == 0x10 ? IL_RULE_EXPRESSION : IL_RULE_VAL_EXPRESSION, (int64_t)r.position,
                 (uint32_t)length);
        r.position += length;
        break;
      }
      case 0x11:  /* offset_extended_sf */
        reg = read_uleb(&r);
        offset = read_sleb(&r);
        if (r.failed || !factored(offset, cie->data_align, &offset)) return 0;
        set_rule(row, reg, IL_RULE_OFFSET, offset, 0);
        break;
      case 0x12:  /* def_cfa_sf */
        reg = read_uleb(&r);
        offset = read_sleb(&r);
        if (r.failed || !factored(offset, cie->data_align, &offset)) return 0;
        row->cfa = (il_cfi_rule){.kind = IL_RULE_REGISTER, .value = (int64_t)reg};
        row->cfa_offset = offset;
        break;
      case 0x13:  /* def_cfa_offset_sf */
        offset = read_sleb(&r);
        if (r.failed || !factored(offset, cie->data_align, &offset) || row->cfa.kind != IL_RULE_REGISTER) return 0;
        row->cfa_offset = offset;
        break;
      case 0x14: case 0x15:  /* val_offset, val_offset_sf */
        reg = read_uleb(&r);
        offset = opcode == 0x14 ? (int64_t)read_uleb(&r) : read_sleb(&r);
        if (r.failed || !factored(offset, cie->data_align, &offset)) return 0;
        set_rule(row, reg, IL_RULE_VAL_OFFSET, offset, 0);
        break;
      case 0x2D:  /* GNU_window_save; on aarch64 AARCH64_negate_ra_state: the return address is signed */
        row->ra_signed ^= 1;
        break;
      case 0x2E: (void)read_uleb(&r); break;  /* GNU_args_size: for landing pads, not for rules */
      case 0x2F:  /* GNU_negative_offset_extended */
        reg = read_uleb(&r);
        value = read_uleb(&r);
        if (r.failed || !factored((int64_t)value, cie->data_align, &offset) || offset == INT64_MIN) return 0;
        set_rule(row, reg, IL_RULE_OFFSET, -offset, 0);
        break;
      default: return 0;
      }
    }
    if (r.failed) return 0;
    if (advancing) {
      if (is_cie_program) return 0;
      if (advancing == 1) {
        uint64_t scaled;
        if (__builtin_mul_overflow(advance, cie->code_align, &scaled) ||
            __builtin_add_overflow(*location, scaled, &new_location)) return 0;
      }
      if (new_location > pc) {
        *next = new_location;
        if (resume) *resume = r.position;
        return 2;
      }
      *location = new_location;
    }
  }
  return 1;
}

static void fill_row(il_cfi_row *row, const cie_info *cie, const il_cfi_fde *fde, const rule_state *current,
                     uint64_t location, uint64_t next) {
  row->location = location;
  row->end = next < fde->pc_end ? next : fde->pc_end;
  row->cfa = current->cfa;
  row->cfa_offset = current->cfa_offset;
  row->return_address_register = cie->return_address;
  row->signal_frame = cie->signal_frame;
  row->ra_signed = current->ra_signed;
  memcpy(row->rules, current->rules, sizeof row->rules);
}

static int fde_row(const il_cfi_section *s, const cie_info *cie, const il_cfi_fde *fde, uint64_t pc, il_cfi_row *row) {
  if (pc < fde->pc_start || pc >= fde->pc_end) return 0;
  /* The run's state (the initial row and the remembered ones) lives here, once. */
  run_state states;
  rule_state current;
  memset(&current, 0, sizeof current);
  states.depth = 0;
  uint64_t location = fde->pc_start, next = fde->pc_end;
  int budget = MAX_INSTRUCTIONS;
  if (run_instructions(s, cie, fde, cie->instructions, cie->end, &current, &location, &states, 1, pc, &next, 0,
                       &budget) != 1)
    return 0;
  states.initial = current;
  states.depth = 0;
  if (!run_instructions(s, cie, fde, fde->instructions, fde->instructions_end, &current, &location, &states, 0, pc,
                        &next, 0, &budget))
    return 0;
  fill_row(row, cie, fde, &current, location, next);
  return 1;
}

/* Every row of `fde` in order, in one run of its instructions: each stop at the next row is where
   fde_row would stop for a pc in this row, and the run goes on from there. */
static int fde_rows(const il_cfi_section *s, const cie_info *cie, const il_cfi_fde *fde, il_cfi_row *row,
                    int (*each)(const il_cfi_row *row, void *context), void *context) {
  run_state states;
  rule_state current;
  memset(&current, 0, sizeof current);
  states.depth = 0;
  uint64_t location = fde->pc_start, next = fde->pc_end;
  int budget = MAX_INSTRUCTIONS;
  if (run_instructions(s, cie, fde, cie->instructions, cie->end, &current, &location, &states, 1, location, &next, 0,
                       &budget) != 1)
    return 0;
  states.initial = current;
  states.depth = 0;
  uint64_t position = fde->instructions;
  while (location < fde->pc_end) {
    next = fde->pc_end;
    int ran = run_instructions(s, cie, fde, position, fde->instructions_end, &current, &location, &states, 0, location,
                               &next, &position, &budget);
    if (!ran) return 0;
    fill_row(row, cie, fde, &current, location, next);
    if (!each(row, context)) return 1;
    if (ran == 1) return 1;
    location = next;
  }
  return 1;
}

static int fde_cie_info(const il_cfi_section *section, const il_cfi_fde *fde, cie_info *cie) {
  entry_header h;
  return read_header(section, fde->cie, section->address + section->size, &h) && !h.terminator &&
         is_cie(section, &h) && parse_cie(section, &h, cie);
}

int il_cfi_fde_row(const il_cfi_section *section, const il_cfi_fde *fde, uint64_t pc, il_cfi_row *row) {
  cie_info cie;
  if (!fde_cie_info(section, fde, &cie)) return 0;
  return fde_row(section, &cie, fde, pc, row);
}

int il_cfi_fde_rows(const il_cfi_section *section, const il_cfi_fde *fde, il_cfi_row *row,
                    int (*each)(const il_cfi_row *row, void *context), void *context) {
  cie_info cie;
  if (!fde_cie_info(section, fde, &cie)) return 0;
  return fde_rows(section, &cie, fde, row, each, context);
}

/* ------------------------------------------------------------------ finding the FDE */

/* The FDE at `address` in `s` that holds pc, with its CIE. */
static int fde_at(const il_cfi_section *s, uint64_t address, uint64_t pc, il_cfi_fde *fde, cie_info *cie) {
  entry_header h;
  if (address < s->address || address - s->address >= s->size) return 0;
  if (!read_header(s, address, s->address + s->size, &h) || h.terminator || is_cie(s, &h)) return 0;
  uint64_t cie_address;
  if (!fde_cie(s, &h, cie, &cie_address) || !parse_fde(s, &h, cie, fde)) return 0;
  fde->cie = cie_address;
  return pc >= fde->pc_start && pc < fde->pc_end;
}

/* Walks every entry of `s` for the FDE holding pc. */
static int linear_search(const il_cfi_section *s, uint64_t pc, il_cfi_fde *fde, cie_info *cie) {
  uint64_t offset = 0;
  uint64_t cached_cie = ~(uint64_t)0;
  for (int count = 0; count < MAX_LINEAR_ENTRIES && offset < s->size; count++) {
    entry_header h;
    if (!read_header(s, s->address + offset, s->address + s->size, &h)) return 0;
    offset = h.end - s->address;
    if (h.terminator) {
      if (!s->debug_frame) return 0;
      continue;
    }
    if (is_cie(s, &h)) continue;
    uint64_t cie_address = s->debug_frame ? s->address + h.id : h.id_position - h.id;
    if (cie_address != cached_cie) {
      if (!fde_cie(s, &h, cie, &cie_address)) return 0;
      cached_cie = cie_address;
    }
    if (!parse_fde(s, &h, cie, fde)) return 0;
    fde->cie = cie_address;
    if (pc >= fde->pc_start && pc < fde->pc_end) return 1;
  }
  return 0;
}

/* .eh_frame_hdr: version 1, eh_frame_ptr's encoding, fde_count's, the table's; then the pointer, the
   count and (location, FDE address) pairs sorted by location. Returns 1 with the FDE, 0 when the table
   has none for pc, -1 when the header is unusable (the caller walks .eh_frame). */
static int header_search(const il_memory *memory, uint64_t header, uint64_t pc, int address_size, uint64_t *eh_frame,
                         uint64_t *fde_address) {
  reader r;
  reader_init(&r, memory, header, ~(uint64_t)0);
  pointer_bases bases = {.data = header, .function = 0};
  uint8_t version = read_u8(&r), frame_encoding = read_u8(&r), count_encoding = read_u8(&r), table_encoding = read_u8(&r);
  if (r.failed || version != 1) return -1;
  *eh_frame = read_encoded(&r, frame_encoding, address_size, &bases);
  if (r.failed) return -1;
  int size = encoded_size(table_encoding, address_size);
  if (count_encoding == PE_OMIT || table_encoding == PE_OMIT || size == 0 || (table_encoding & 0x70) == PE_ALIGNED)
    return -1;
  uint64_t count = read_encoded(&r, count_encoding, address_size, &bases);
  if (r.failed || count == 0 || count > (~(uint64_t)0 >> 5)) return -1;
  uint64_t table = r.position;
  uint64_t entry = 2 * (uint64_t)size;
  /* count < 2^59 and entry <= 16: the product fits; the sum may wrap past the top. */
  if (table + count * entry < table) return -1;
  /* One reader over the whole table: once the search has narrowed to its read-ahead window, the
     remaining probes (and the FDE address) are answered from it without another read. */
  reader e;
  reader_init(&e, memory, table, table + count * entry);
  uint64_t low = 0, high = count;
  for (int probe = 0; probe < MAX_SEARCH_PROBES && low < high; probe++) {
    uint64_t middle = low + (high - low) / 2;
    e.position = table + middle * entry;
    uint64_t location = read_encoded(&e, table_encoding, address_size, &bases);
    if (e.failed) return -1;
    if (location <= pc) low = middle + 1; else high = middle;
  }
  if (low >= high && low == 0) return 0;
  if (low != high) return -1;  /* did not converge within the probes: count was a lie */
  e.position = table + (low - 1) * entry + size;
  *fde_address = read_encoded(&e, table_encoding, address_size, &bases);
  return e.failed ? -1 : 1;
}

/* How far an .eh_frame found through its header may be walked: the caller gave no size. */
static const uint64_t UNKNOWN_EH_FRAME_SIZE = 1ull << 32;

static int find_fde(const il_memory *memory, const il_unwind_image *image, uint64_t pc, il_cfi_section *section,
                    il_cfi_fde *fde, cie_info *cie) {
  /* A 32-bit image's .eh_frame_hdr (i386 PIC: datarel|sdata4 relative to the header's start, as every
     header) and .eh_frame hold 4-byte pointers, and their sums wrap at 32 bits. */
  uint8_t size = image->address_size == 4 ? 4 : 8;
  if (image->eh_frame_hdr != 0) {
    uint64_t eh_frame = 0, fde_address = 0;
    int found = header_search(memory, image->eh_frame_hdr, pc, size, &eh_frame, &fde_address);
    if (found >= 0) {
      *section = (il_cfi_section){.memory = memory, .address = eh_frame, .address_size = size};
      section->size = image->eh_frame != 0 && image->eh_frame == eh_frame ? image->eh_frame_size : UNKNOWN_EH_FRAME_SIZE;
      if (section->address + section->size < section->address) section->size = ~(uint64_t)0 - section->address;
      if (found == 1 && fde_at(section, fde_address, pc, fde, cie)) return 1;
    } else if (image->eh_frame == 0 && eh_frame != 0) {
      /* A header without a usable table still says where .eh_frame is. */
      *section = (il_cfi_section){.memory = memory, .address = eh_frame, .size = UNKNOWN_EH_FRAME_SIZE, .address_size = size};
      if (section->address + section->size < section->address) section->size = ~(uint64_t)0 - section->address;
      if (linear_search(section, pc, fde, cie)) return 1;
    }
    if (found < 0 && image->eh_frame != 0) {
      *section = (il_cfi_section){.memory = memory, .address = image->eh_frame, .size = image->eh_frame_size, .address_size = size};
      if (linear_search(section, pc, fde, cie)) return 1;
    }
  } else if (image->eh_frame != 0) {
    *section = (il_cfi_section){.memory = memory, .address = image->eh_frame, .size = image->eh_frame_size, .address_size = size};
    if (linear_search(section, pc, fde, cie)) return 1;
  }
  if (image->debug_frame_memory != NULL && image->debug_frame_size != 0) {
    *section = (il_cfi_section){.memory = image->debug_frame_memory, .address = image->debug_frame,
                                .size = image->debug_frame_size, .debug_frame = 1, .load_bias = image->load_bias,
                                .address_size = size};
    if (linear_search(section, pc, fde, cie)) return 1;
  }
  return 0;
}

int il_cfi_find_row(const il_memory *memory, const il_unwind_image *image, uint64_t pc, il_cfi_row *row) {
  il_cfi_section section;
  il_cfi_fde fde;
  cie_info cie;
  if (!find_fde(memory, image, pc, &section, &fde, &cie)) return 0;
  return fde_row(&section, &cie, &fde, pc, row);
}

/* ------------------------------------------------------------------ DWARF expressions */

static int register_value(const il_register_set *registers, uint64_t reg, uint64_t *out) {
  if (reg >= IL_REGISTER_COUNT || !(registers->known & (1ull << reg))) return 0;
  *out = registers->value[reg];
  return 1;
}

/* Evaluates the expression at [address, address + length) in `memory` over `registers`, with `initial`
   pushed first when `push_initial`. The value on top at the end is the result. */
static int evaluate(const il_memory *code_memory, const il_memory *memory, uint64_t address, uint32_t length,
                    const il_register_set *registers, int push_initial, uint64_t initial, uint64_t *result) {
  /* The generic type is the address size: 32 bits for i386. Only the top of the stack is ever a new
     value, so wrapping it after each operation keeps every entry 32-bit. */
  int size = registers->arch == IL_ARCH_I386 ? 4 : 8;
  uint64_t stack[EXPRESSION_STACK];
  int depth = 0;
  if (push_initial) stack[depth++] = wrap(initial, size);
  reader r;
  reader_init(&r, code_memory, address, address + length);
  if (r.end < r.position) return 0;
#define NEED(n) do { if (depth < (n)) return 0; } while (0)
#define PUSH(v) do { if (depth >= EXPRESSION_STACK) return 0; uint64_t pushed_ = (v); stack[depth] = pushed_; depth++; } while (0)
  for (int steps = 0; r.position < r.end; steps++) {
    if (steps >= MAX_EXPRESSION_STEPS) return 0;
    if (depth > 0) stack[depth - 1] = wrap(stack[depth - 1], size);
    uint8_t op = read_u8(&r);
    if (r.failed) return 0;
    uint64_t a, b;
    if (op >= 0x30 && op <= 0x4F) { PUSH((uint64_t)(op - 0x30)); continue; }  /* lit0..31 */
    if (op >= 0x50 && op <= 0x6F) {  /* reg0..31: a register's value (CFI uses breg; tolerated) */
      if (!register_value(registers, op - 0x50, &a)) return 0;
      PUSH(a);
      continue;
    }
    if (op >= 0x70 && op <= 0x8F) {  /* breg0..31 */
      int64_t offset = read_sleb(&r);
      if (r.failed || !register_value(registers, op - 0x70, &a)) return 0;
      PUSH(a + (uint64_t)offset);
      continue;
    }
    switch (op) {
    case 0x03: a = read_unsigned(&r, size); PUSH(a); break;                       /* addr */
    case 0x06: {                                                                  /* deref */
      NEED(1);
      if (!read_pointer(memory, stack[depth - 1], size, &a)) return 0;
      stack[depth - 1] = a;
      break;
    }
    case 0x08: a = read_unsigned(&r, 1); PUSH(a); break;                          /* const1u */
    case 0x09: a = (uint64_t)read_signed(&r, 1); PUSH(a); break;                  /* const1s */
    case 0x0A: a = read_unsigned(&r, 2); PUSH(a); break;
    case 0x0B: a = (uint64_t)read_signed(&r, 2); PUSH(a); break;
    case 0x0C: a = read_unsigned(&r, 4); PUSH(a); break;
    case 0x0D: a = (uint64_t)read_signed(&r, 4); PUSH(a); break;
    case 0x0E: a = read_unsigned(&r, 8); PUSH(a); break;
    case 0x0F: a = (uint64_t)read_signed(&r, 8); PUSH(a); break;
    case 0x10: a = read_uleb(&r); PUSH(a); break;                                 /* constu */
    case 0x11: a = (uint64_t)read_sleb(&r); PUSH(a); break;                       /* consts */
    case 0x12: NEED(1); PUSH(stack[depth - 1]); break;                            /* dup */
    case 0x13: NEED(1); depth--; break;                                           /* drop */
    case 0x14: NEED(2); PUSH(stack[depth - 2]); break;                            /* over */
    case 0x15: {                                                                  /* pick */
      uint8_t index = read_u8(&r);
      if (r.failed || index >= depth) return 0;
      PUSH(stack[depth - 1 - index]);
      break;
    }
    case 0x16: NEED(2); a = stack[depth - 1]; stack[depth - 1] = stack[depth - 2]; stack[depth - 2] = a; break;
    case 0x17:                                                                    /* rot */
      NEED(3);
      a = stack[depth - 1];
      stack[depth - 1] = stack[depth - 2];
      stack[depth - 2] = stack[depth - 3];
      stack[depth - 3] = a;
      break;
    case 0x19: NEED(1); if (as_signed(stack[depth - 1], size) < 0) stack[depth - 1] = 0 - stack[depth - 1]; break;  /* abs */
    case 0x1A: NEED(2); b = stack[--depth]; stack[depth - 1] &= b; break;         /* and */
    case 0x1B: case 0x1D: {                                                       /* div, mod */
      NEED(2);
      b = stack[--depth];
      a = stack[depth - 1];
      if (b == 0) return 0;
      if (op == 0x1B) {
        if (as_signed(a, size) == INT64_MIN && as_signed(b, size) == -1) return 0;
        stack[depth - 1] = (uint64_t)(as_signed(a, size) / as_signed(b, size));
      } else {
        stack[depth - 1] = a % b;
      }
      break;
    }
    case 0x1C: NEED(2); b = stack[--depth]; stack[depth - 1] -= b; break;         /* minus */
    case 0x1E: NEED(2); b = stack[--depth]; stack[depth - 1] *= b; break;         /* mul */
    case 0x1F: NEED(1); stack[depth - 1] = 0 - stack[depth - 1]; break;           /* neg */
    case 0x20: NEED(1); stack[depth - 1] = ~stack[depth - 1]; break;              /* not */
    case 0x21: NEED(2); b = stack[--depth]; stack[depth - 1] |= b; break;         /* or */
    case 0x22: NEED(2); b = stack[--depth]; stack[depth - 1] += b; break;         /* plus */
    case 0x23: NEED(1); a = read_uleb(&r); stack[depth - 1] += a; break;          /* plus_uconst */
    case 0x24: NEED(2); b = stack[--depth]; stack[depth - 1] = b >= 64 ? 0 : stack[depth - 1] << b; break;  /* shl */
    case 0x25: NEED(2); b = stack[--depth]; stack[depth - 1] = b >= 64 ? 0 : stack[depth - 1] >> b; break;  /* shr */
    case 0x26:                                                                    /* shra */
      NEED(2);
      b = stack[--depth];
      stack[depth - 1] = (uint64_t)(as_signed(stack[depth - 1], size) >> (b >= 63 ? 63 : b));
      break;
    case 0x27: NEED(2); b = stack[--depth]; stack[depth - 1] ^= b; break;         /* xor */
    case 0x29: case 0x2A: case 0x2B: case 0x2C: case 0x2D: case 0x2E: {          /* eq ge gt le lt ne */
      NEED(2);
      int64_t y = as_signed(stack[--depth], size), x = as_signed(stack[depth - 1], size);
      int truth = op == 0x29 ? x == y : op == 0x2A ? x >= y : op == 0x2B ? x > y : op == 0x2C ? x <= y
                : op == 0x2D ? x < y : x != y;
      stack[depth - 1] = (uint64_t)truth;
      break;
    }
    case 0x2F: case 0x28: {                                                       /* skip, bra */
      int64_t offset = read_signed(&r, 2);
      if (r.failed) return 0;
      if (op == 0x28) {
        NEED(1);
        if (stack[--depth] == 0) break;
      }
      uint64_t target = r.position + (uint64_t)offset;
      if (target < address || target > r.end) return 0;
      r.position = target;
      break;
    }
    case 0x90: {                                                                  /* regx */
      a = read_uleb(&r);
      if (r.failed || !register_value(registers, a, &b)) return 0;
      PUSH(b);
      break;
    }
    case 0x92: {                                                                  /* bregx */
      a = read_uleb(&r);
      int64_t offset = read_sleb(&r);
      if (r.failed || !register_value(registers, a, &b)) return 0;
      PUSH(b + (uint64_t)offset);
      break;
    }
    case 0x94: {                                                                  /* deref_size */
      uint8_t size = read_u8(&r);
      uint8_t bytes[8];
      NEED(1);
      if (r.failed || size == 0 || size > 8 || !memory_read(memory, stack[depth - 1], bytes, size)) return 0;
      stack[depth - 1] = little_endian(bytes, size);
      break;
    }
    case 0x96: break;                                                             /* nop */
    default: return 0;
    }
    if (r.failed) return 0;
  }
#undef NEED
#undef PUSH
  if (depth == 0) return 0;
  *result = wrap(stack[depth - 1], size);
  return 1;
}

int il_cfi_evaluate(const il_memory *code, const il_memory *memory, uint64_t address, uint32_t length,
                    const il_register_set *registers, int push_initial, uint64_t initial, uint64_t *result) {
  return evaluate(code, memory, address, length, registers, push_initial, initial, result);
}

/* ------------------------------------------------------------------ one step */

static int sp_register(il_arch arch) {
  return arch == IL_ARCH_AARCH64 ? IL_AARCH64_SP : arch == IL_ARCH_I386 ? IL_I386_ESP : IL_X86_64_RSP;
}
static int pc_register(il_arch arch) {
  return arch == IL_ARCH_AARCH64 ? IL_AARCH64_PC : arch == IL_ARCH_I386 ? IL_I386_EIP : IL_X86_64_RIP;
}
static int fp_register(il_arch arch) {
  return arch == IL_ARCH_AARCH64 ? IL_AARCH64_FP : arch == IL_ARCH_I386 ? IL_I386_EBP : IL_X86_64_RBP;
}
/* The size of a pointer (and of a stack word) in the unwound process. */
static int word_size(il_arch arch) { return arch == IL_ARCH_I386 ? 4 : 8; }

static void set_register(il_register_set *registers, int reg, uint64_t value) {
  registers->value[reg] = value;
  registers->known |= 1ull << reg;
}

static int known(const il_register_set *registers, int reg) { return (registers->known >> reg) & 1; }

/* The image holding `address` (a pc to look up), checked to be in its text. */
static int image_for(const il_unwinder *unwinder, uint64_t address, il_unwind_image *image) {
  if (unwinder->find_image == NULL) return 0;
  memset(image, 0, sizeof *image);
  if (!unwinder->find_image(unwinder->find_context, address, image)) return 0;
  return address >= image->text_start && address < image->text_end;
}

int il_x86_64_follows_call(const il_memory *memory, uint64_t address) {
  uint8_t bytes[8];
  if (address < 8 || !memory_read(memory, address - 8, bytes, sizeof bytes)) return 0;
  if (bytes[3] == 0xE8) return 1;  /* E8 rel32 */
  for (int length = 2; length <= 7; length++) {
    uint8_t opcode = bytes[8 - length], modrm = bytes[9 - length];
    if (opcode != 0xFF || ((modrm >> 3) & 7) != 2) continue;
    int mod = modrm >> 6, rm = modrm & 7, expected;  /* the length this ModRM implies */
    if (mod == 3) expected = 2;
    /* With a SIB byte (rm 4) the instruction is at least 3 bytes: a 2-byte candidate has none to read
       (its "SIB" would be the byte at the return address itself, past what was read). */
    else if (mod == 0) expected = rm == 5 ? 6 : rm == 4 ? (length < 3 ? 3 : (bytes[10 - length] & 7) == 5 ? 7 : 3) : 2;
    else if (mod == 1) expected = rm == 4 ? 4 : 3;
    else expected = rm == 4 ? 7 : 6;
    if (expected == length) return 1;
  }
  return 0;
}

/* A plausible return address: in some image's text and, on x86, just after a call. */
static int plausible_return(const il_unwinder *unwinder, il_arch arch, uint64_t address) {
  il_unwind_image image;
  if (address < 2 || !image_for(unwinder, address - 1, &image)) return 0;
  if (arch == IL_ARCH_X86_64 || arch == IL_ARCH_I386) return il_x86_64_follows_call(&unwinder->memory, address);
  if (arch == IL_ARCH_AARCH64) return address % 4 == 0;
  return 1;
}

/* Applies `row` to `from`: the caller's registers in `to`. 1 when the return address is known. */
static int apply_row(const il_unwinder *unwinder, const il_cfi_row *row, const il_memory *code_memory,
                     const il_register_set *from, il_register_set *to, uint64_t *cfa_out) {
  const il_memory *memory = &unwinder->memory;
  int size = word_size(from->arch);
  uint64_t cfa;
  if (row->cfa.kind == IL_RULE_REGISTER) {
    uint64_t base;
    if (!register_value(from, (uint64_t)row->cfa.value, &base)) return 0;
    cfa = wrap(base + (uint64_t)row->cfa_offset, size);
  } else if (row->cfa.kind == IL_RULE_VAL_EXPRESSION) {
    if (!evaluate(code_memory, memory, (uint64_t)row->cfa.value, row->cfa.length, from, 0, 0, &cfa)) return 0;
  } else {
    return 0;
  }
  *to = *from;
  uint64_t ra_column = row->return_address_register;
  if (ra_column >= IL_CFI_COLUMNS) return 0;
  for (int reg = 0; reg < IL_REGISTER_COUNT; reg++) {
    const il_cfi_rule *rule = &row->rules[reg];
    uint64_t value;
    switch (rule->kind) {
    case IL_RULE_NONE: case IL_RULE_SAME_VALUE: continue;
    case IL_RULE_UNDEFINED: to->known &= ~(1ull << reg); continue;
    case IL_RULE_OFFSET:
      if (!read_pointer(memory, wrap(cfa + (uint64_t)rule->value, size), size, &value)) {
        if ((uint64_t)reg == ra_column) return 0;
        to->known &= ~(1ull << reg);
        continue;
      }
      break;
    case IL_RULE_VAL_OFFSET: value = wrap(cfa + (uint64_t)rule->value, size); break;
    case IL_RULE_REGISTER:
      if (!register_value(from, (uint64_t)rule->value, &value)) {
        if ((uint64_t)reg == ra_column) return 0;
        to->known &= ~(1ull << reg);
        continue;
      }
      break;
    case IL_RULE_EXPRESSION: case IL_RULE_VAL_EXPRESSION: {
      uint64_t computed;
      if (!evaluate(code_memory, memory, (uint64_t)rule->value, rule->length, from, 1, cfa, &computed) ||
          (rule->kind == IL_RULE_EXPRESSION && !read_pointer(memory, computed, size, &computed))) {
        if ((uint64_t)reg == ra_column) return 0;
        to->known &= ~(1ull << reg);
        continue;
      }
      value = computed;
      break;
    }
    default: return 0;
    }
    set_register(to, reg, value);
  }
  /* The return address: its column's rule (no rule or undefined there: the outermost frame). */
  /* Without a rule the column keeps its value (aarch64's leaf functions: the return address is still
     in lr); on x86_64 that would be this frame's own pc again. */
  const il_cfi_rule *ra = &row->rules[ra_column];
  if (ra->kind == IL_RULE_UNDEFINED || ra_column >= IL_REGISTER_COUNT || !known(to, (int)ra_column)) return 0;
  if ((ra->kind == IL_RULE_NONE || ra->kind == IL_RULE_SAME_VALUE) && (int)ra_column == pc_register(from->arch)) return 0;
  uint64_t return_address = to->value[ra_column];
  if (from->arch == IL_ARCH_AARCH64 && row->ra_signed) {
    return_address &= 0x0000FFFFFFFFFFFFull;  /* pointer authentication: strip the signature bits */
  }
  /* The caller's stack pointer is the CFA unless a rule said otherwise (signal frames restore it). */
  int sp = sp_register(from->arch);
  if (row->rules[sp].kind == IL_RULE_NONE || row->rules[sp].kind == IL_RULE_SAME_VALUE) set_register(to, sp, cfa);
  set_register(to, pc_register(from->arch), return_address);
  *cfa_out = cfa;
  return 1;
}

/* The kernel's signal return trampoline without CFI (qemu-user's, an aarch64 vDSO we cannot see): its
   code is recognised as libgcc's MD_FALLBACK_FRAME_STATE_FOR does, and the interrupted registers read
   from the rt_sigframe at sp. */
static int signal_trampoline(const il_unwinder *unwinder, const il_register_set *from, il_register_set *to) {
  const il_memory *memory = &unwinder->memory;
  uint64_t pc = from->value[pc_register(from->arch)], sp = from->value[sp_register(from->arch)];
  if (!known(from, sp_register(from->arch))) return 0;
  if (from->arch == IL_ARCH_AARCH64) {
    uint8_t code[8];
    /* mov x8, #139 (rt_sigreturn); svc #0 */
    if (!memory_read(memory, pc, code, 8) || little_endian(code, 4) != 0xD2801168u || little_endian(code + 4, 4) != 0xD4000001u)
      return 0;
    /* struct rt_sigframe { siginfo_t (128 bytes); struct ucontext } and the ucontext's uc_mcontext
       (16-byte aligned, at 176): fault_address, regs[31], sp, pc. */
    uint64_t context = sp + 128 + 176;
    uint64_t words[34];
    if (!memory_read(memory, context + 8, words, sizeof words)) return 0;
    memset(to, 0, sizeof *to);
    to->arch = from->arch;
    for (int reg = 0; reg <= 30; reg++) set_register(to, reg, words[reg]);
    set_register(to, IL_AARCH64_SP, words[31]);
    set_register(to, IL_AARCH64_PC, words[32]);
    return 1;
  }
  if (from->arch == IL_ARCH_X86_64) {
    uint8_t code[9];
    /* mov $15, %rax (rt_sigreturn); syscall */
    static const uint8_t expected[9] = {0x48, 0xC7, 0xC0, 0x0F, 0x00, 0x00, 0x00, 0x0F, 0x05};
    if (!memory_read(memory, pc, code, 9)) return 0;
    for (int i = 0; i < 9; i++) {
      if (code[i] != expected[i]) return 0;
    }
    /* The handler's ret popped pretcode: sp is the ucontext; its gregs at 40, in REG_R8.. order. */
    uint64_t gregs[17];
    if (!memory_read(memory, sp + 40, gregs, sizeof gregs)) return 0;
    static const int dwarf[17] = {8, 9, 10, 11, 12, 13, 14, 15, 5, 4, 6, 3, 1, 0, 2, 7, 16};
    memset(to, 0, sizeof *to);
    to->arch = from->arch;
    for (int i = 0; i < 17; i++) set_register(to, dwarf[i], gregs[i]);
    return 1;
  }
  if (from->arch == IL_ARCH_I386) {
    /* glibc's __restore (sigreturn, for handlers without SA_SIGINFO): pop %eax; mov $119, %eax; int $0x80.
       __restore_rt (rt_sigreturn): mov $173, %eax; int $0x80. The handler's ret popped pretcode: sp is
       the signal number, then the sigcontext (sigframe), or siginfo and ucontext pointers, the siginfo
       (128 bytes) and the ucontext, whose uc_mcontext is at 20 (rt_sigframe). */
    static const uint8_t restore[8] = {0x58, 0xB8, 0x77, 0x00, 0x00, 0x00, 0xCD, 0x80};
    static const uint8_t restore_rt[7] = {0xB8, 0xAD, 0x00, 0x00, 0x00, 0xCD, 0x80};
    uint8_t code[8];
    int rt = 1, plain = 1;
    if (!memory_read(memory, pc, code, 7)) return 0;
    for (int i = 0; i < 7; i++) rt &= code[i] == restore_rt[i];
    if (!rt) {
      if (!memory_read(memory, pc, code, 8)) return 0;
      for (int i = 0; i < 8; i++) plain &= code[i] == restore[i];
      if (!plain) return 0;
    }
    uint64_t context = rt ? sp + 12 + 128 + 20 : sp + 4;
    /* struct sigcontext: gs fs es ds edi esi ebp esp ebx edx ecx eax trapno err eip, 32 bits each. */
    uint8_t words[15 * 4];
    if (context > 0xFFFFFFFFu || !memory_read(memory, context, words, sizeof words)) return 0;
    static const int dwarf[11] = {7, 6, 5, 4, 3, 2, 1, 0, -1, -1, 8};  /* edi .. eip, from index 4 */
    memset(to, 0, sizeof *to);
    to->arch = from->arch;
    for (int i = 0; i < 11; i++) {
      if (dwarf[i] >= 0) set_register(to, dwarf[i], little_endian(words + (4 + i) * 4, 4));
    }
    return 1;
  }
  return 0;
}

void il_unwind_start(il_unwind_cursor *cursor, const il_register_set *registers) {
  memset(cursor, 0, sizeof *cursor);
  cursor->registers = *registers;
  cursor->trust = IL_FRAME_CONTEXT;
  cursor->pc_is_exact = 1;
  cursor->floor = registers->value[sp_register(registers->arch)];
  cursor->steps = 0;
  cursor->cfa = 0;
}

uint64_t il_unwind_lookup_pc(const il_unwind_cursor *cursor) {
  uint64_t pc = cursor->registers.value[pc_register(cursor->registers.arch)];
  return cursor->pc_is_exact || pc == 0 ? pc : pc - 1;
}

/* Moves the cursor to `next` when it is progress: a nonzero pc, a stack pointer not below the floor
   nor the current one (a signal frame may move to another stack: an alternate signal stack), not the
   same pc and sp again, not the same CFA twice. */
static int accept(il_unwind_cursor *cursor, const il_register_set *next, il_frame_trust trust, int exact,
                  int crossing_signal, uint64_t cfa) {
  il_arch arch = cursor->registers.arch;
  int sp = sp_register(arch), pc = pc_register(arch);
  if (!known(next, pc) || !known(next, sp) || next->value[pc] == 0) return 0;
  uint64_t old_sp = cursor->registers.value[sp], new_sp = next->value[sp];
  if (!crossing_signal) {
    if (new_sp < cursor->floor || new_sp < old_sp) return 0;
    if (new_sp == old_sp && next->value[pc] == cursor->registers.value[pc]) return 0;
    if (cfa != 0 && cursor->cfa == cfa) return 0;  /* the same frame twice */
  }
  cursor->cfa = cfa;
  cursor->registers = *next;
  cursor->trust = trust;
  cursor->pc_is_exact = exact;
  cursor->floor = crossing_signal ? new_sp : (new_sp > cursor->floor ? new_sp : cursor->floor);
  return 1;
}

int il_unwind_step(const il_unwinder *unwinder, il_unwind_cursor *cursor) {
  if (cursor->steps >= MAX_STEPS) return 0;
  cursor->steps++;
  il_register_set *from = &cursor->registers;
  il_arch arch = from->arch;
  if (arch != IL_ARCH_X86_64 && arch != IL_ARCH_AARCH64 && arch != IL_ARCH_I386) return 0;
  int sp = sp_register(arch), pc = pc_register(arch), fp = fp_register(arch), size = word_size(arch);
  if (!known(from, pc) || !known(from, sp)) return 0;
  uint64_t lookup = il_unwind_lookup_pc(cursor);
  il_register_set next;
  il_unwind_image image;
  int in_image = image_for(unwinder, lookup, &image);
  if (arch == IL_ARCH_I386) image.address_size = 4;  /* an i386 thread runs 32-bit code */

  /* 1. Call frame information. */
  if (in_image) {
    il_cfi_row row;
    il_cfi_section section;
    il_cfi_fde fde;
    cie_info cie;
    if (find_fde(&unwinder->memory, &image, lookup, &section, &fde, &cie) && fde_row(&section, &cie, &fde, lookup, &row)) {
      uint64_t cfa;
      if (apply_row(unwinder, &row, section.memory, from, &next, &cfa)) {
        /* A signal frame's caller was interrupted, not calling: its pc is exact. */
        if (accept(cursor, &next, IL_FRAME_CFI, row.signal_frame, row.signal_frame, cfa)) return 1;
      }
      /* CFI said this is the outermost frame (an undefined return address): the end, as every unwinder. */
      if (row.rules[row.return_address_register < IL_CFI_COLUMNS ? row.return_address_register : 0].kind ==
          IL_RULE_UNDEFINED)
        return 0;
    }
  }

  /* 2. The signal trampoline without CFI. */
  if (signal_trampoline(unwinder, from, &next) && accept(cursor, &next, IL_FRAME_CFI, 1, 1, 0)) return 1;

  /* 3. Frame 0 outside every image: a call through a bad pointer. The caller is in the return address
     the call left on top of the stack (x86_64) or in the link register (aarch64). */
  if (!in_image && cursor->steps == 1) {
    next = *from;
    uint64_t caller = 0;
    if (arch == IL_ARCH_X86_64 || arch == IL_ARCH_I386) {
      if (read_pointer(&unwinder->memory, from->value[sp], size, &caller)) {
        set_register(&next, sp, wrap(from->value[sp] + (uint64_t)size, size));
      }
    } else if (known(from, IL_AARCH64_LR)) {
      caller = from->value[IL_AARCH64_LR];
    }
    if (caller != 0 && plausible_return(unwinder, arch, caller)) {
      set_register(&next, pc, caller);
      if (accept(cursor, &next, IL_FRAME_CFI, 0, 0, 0)) return 1;
    }
  }

  /* 4. aarch64 leaf in frame 0 (-momit-leaf-frame-pointer): its caller is only in LR when the instruction
     before LR is a BL whose target is at most 4 KiB below the pc (the leaf's entry). */
  if (arch == IL_ARCH_AARCH64 && cursor->steps == 1 && in_image && known(from, IL_AARCH64_LR)) {
    uint64_t lr = from->value[IL_AARCH64_LR];
    uint8_t code[4];
    if (lr >= 4 && plausible_return(unwinder, arch, lr) && memory_read(&unwinder->memory, lr - 4, code, 4)) {
      uint32_t instruction = (uint32_t)little_endian(code, 4);
      if ((instruction & 0xFC000000u) == 0x94000000u) {  /* BL imm26 */
        int64_t displacement = (int64_t)((uint64_t)(instruction & 0x03FFFFFFu) << 38) >> 36;
        uint64_t target = lr - 4 + (uint64_t)displacement;
        if (target <= from->value[pc] && from->value[pc] - target < 4096) {
          next = *from;
          set_register(&next, pc, lr);
          if (accept(cursor, &next, IL_FRAME_FRAME_POINTER, 0, 0, 0)) return 1;
        }
      }
    }
  }

  /* 5. Frame pointers: [fp] the caller's fp, [fp + word] the return address (i386: ebp, [ebp + 4]). */
  if (known(from, fp)) {
    uint64_t frame = from->value[fp], record[2];
    if (frame % (uint64_t)size == 0 && frame >= cursor->floor && frame >= from->value[sp] &&
        read_pointer(&unwinder->memory, frame, size, &record[0]) &&
        read_pointer(&unwinder->memory, frame + (uint64_t)size, size, &record[1]) &&
        plausible_return(unwinder, arch, record[1])) {
      next = *from;
      set_register(&next, fp, record[0]);
      set_register(&next, sp, wrap(frame + 2 * (uint64_t)size, size));
      set_register(&next, pc, record[1]);
      if (arch == IL_ARCH_AARCH64) set_register(&next, IL_AARCH64_LR, record[1]);
      if (accept(cursor, &next, IL_FRAME_FRAME_POINTER, 0, 0, 0)) return 1;
    }
  }

  /* 6. Stack scanning: the first word above sp that looks like a return address. */
  uint64_t words = unwinder->scan_bytes / (uint64_t)size;
  uint64_t start = from->value[sp];
  if (start % (uint64_t)size != 0) start = (start + (uint64_t)size - 1) & ~((uint64_t)size - 1);
  for (uint64_t i = 0; i < words; i++) {
    uint64_t at = start + i * (uint64_t)size, word;
    if (at < start) break;
    if (!read_pointer(&unwinder->memory, at, size, &word)) break;
    if (!plausible_return(unwinder, arch, word)) continue;
    next = *from;
    set_register(&next, sp, wrap(at + (uint64_t)size, size));
    set_register(&next, pc, word);
    if (arch == IL_ARCH_AARCH64) next.known &= ~(1ull << IL_AARCH64_LR);
    if (accept(cursor, &next, IL_FRAME_SCAN, 0, 0, 0)) return 1;
  }
  return 0;
}
