/* Call frame information: CIEs and FDEs of .eh_frame and .debug_frame, their instructions run to the
   row for an address (or every row of an FDE), and the FDE for a pc found through .eh_frame_hdr's
   binary search or a bounded walk. See CImageLogUnwind.h for the contract; every loop is capped
   independently of the data and any malformed byte gives up (0), never a fault. */
#include "unwind_internal.h"

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

/* Starts a run of `fde`'s instructions: the CIE's initial instructions run into `current`, which becomes
   the initial row; `location` and `next` span the FDE. */
static int start_run(const il_cfi_section *s, const cie_info *cie, const il_cfi_fde *fde, uint64_t pc,
                     run_state *states, rule_state *current, uint64_t *location, uint64_t *next, int *budget) {
  memset(current, 0, sizeof *current);
  states->depth = 0;
  *location = fde->pc_start;
  *next = fde->pc_end;
  *budget = MAX_INSTRUCTIONS;
  if (run_instructions(s, cie, fde, cie->instructions, cie->end, current, location, states, 1, pc, next, 0, budget) != 1)
    return 0;
  states->initial = *current;
  states->depth = 0;
  return 1;
}

static int fde_row(const il_cfi_section *s, const cie_info *cie, const il_cfi_fde *fde, uint64_t pc, il_cfi_row *row) {
  if (pc < fde->pc_start || pc >= fde->pc_end) return 0;
  /* The run's state (the initial row and the remembered ones) lives here, once. */
  run_state states;
  rule_state current;
  uint64_t location, next;
  int budget;
  if (!start_run(s, cie, fde, pc, &states, &current, &location, &next, &budget)) return 0;
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
  uint64_t location, next;
  int budget;
  if (!start_run(s, cie, fde, fde->pc_start, &states, &current, &location, &next, &budget)) return 0;
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

int il_cfi_find_section_row(const il_memory *memory, const il_unwind_image *image, uint64_t pc, il_cfi_row *row,
                            il_cfi_section *section) {
  il_cfi_fde fde;
  cie_info cie;
  if (!find_fde(memory, image, pc, section, &fde, &cie)) return 0;
  return fde_row(section, &cie, &fde, pc, row);
}

int il_cfi_find_row(const il_memory *memory, const il_unwind_image *image, uint64_t pc, il_cfi_row *row) {
  il_cfi_section section;
  return il_cfi_find_section_row(memory, image, pc, row, &section);
}
