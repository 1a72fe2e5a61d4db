/* libFuzzer entry for the unwinder's CFI engine (Sources/CImageLogUnwind), built only by `make fuzz`
   with clang -fsanitize=fuzzer,address,undefined. The input is a process's memory: an ELF64 file is
   mapped at its PT_LOADs' link-time addresses with PT_GNU_EH_FRAME as the header (the seeds are the
   committed fixtures; an ELF32 one, i386's, the same with 4-byte pointers); any other input is read as
   an .eh_frame at 0x10000 and, separately, as an .eh_frame_hdr there, with 8-byte and with 4-byte
   pointers. Every entry, rows at each FDE's start, middle and end, lookups through the header, and
   walks (x86_64, aarch64, i386) over a stack made of the input's own words run; a crash, an
   out-of-bounds access, undefined behaviour or a hang (libFuzzer's -timeout) is a finding. */
#include <stdint.h>
#include <string.h>

#include "CImageLogUnwind.h"

enum { MAX_SEGMENTS = 16, STACK_WORDS = 256 };

typedef struct {
  struct { uint64_t address, offset, size; } segments[MAX_SEGMENTS];
  int count;
  const uint8_t *data;
  size_t size;
  uint64_t stack[STACK_WORDS];
  uint64_t stack_address;  /* where the stack is for the walk in progress */
} fuzz_memory;

/* A 64-bit process's stack, and a 32-bit one's (below 4 GiB). */
static const uint64_t STACK_ADDRESS = 0x7ff000000000ull, STACK_ADDRESS_32 = 0xff000000u;

static int fuzz_read(void *context, uint64_t address, void *out, size_t length) {
  const fuzz_memory *memory = context;
  uint64_t stack = memory->stack_address;
  if (address >= stack && address - stack <= sizeof memory->stack && length <= sizeof memory->stack - (address - stack)) {
    memcpy(out, (const uint8_t *)memory->stack + (address - stack), length);
    return 1;
  }
  for (int i = 0; i < memory->count; i++) {
    uint64_t start = memory->segments[i].address, size = memory->segments[i].size;
    if (address >= start && address - start <= size && length <= size - (address - start)) {
      memcpy(out, memory->data + memory->segments[i].offset + (address - start), length);
      return 1;
    }
  }
  return 0;
}

static uint64_t le(const uint8_t *bytes, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; i--) value = value << 8 | bytes[i];
  return value;
}

typedef struct {
  const il_unwind_image *image;
} find_context;

static int fuzz_find(void *context, uint64_t pc, il_unwind_image *image) {
  const find_context *find = context;
  if (pc < find->image->text_start || pc >= find->image->text_end) return 0;
  *image = *find->image;
  return 1;
}

static void walk(fuzz_memory *memory, const il_unwind_image *image, il_arch arch, uint64_t pc, int without_code) {
  il_memory reader = {.read = fuzz_read, .context = memory};
  find_context find = {.image = image};
  il_unwinder unwinder = {.memory = reader, .find_image = fuzz_find, .find_context = &find, .scan_bytes = 512,
                          .without_code = without_code};
  il_register_set registers;
  memset(&registers, 0, sizeof registers);
  registers.arch = arch;
  memory->stack_address = arch == IL_ARCH_I386 ? STACK_ADDRESS_32 : STACK_ADDRESS;
  for (int i = 0; i < IL_REGISTER_COUNT; i++) {
    registers.value[i] = memory->stack_address + (uint64_t)(i * 24 % (STACK_WORDS * 8));
    registers.known |= 1ull << i;
  }
  int pc_register = arch == IL_ARCH_AARCH64 ? IL_AARCH64_PC : arch == IL_ARCH_I386 ? IL_I386_EIP : IL_X86_64_RIP;
  registers.value[pc_register] = arch == IL_ARCH_I386 ? pc & 0xFFFFFFFFu : pc;
  il_unwind_cursor cursor;
  il_unwind_start(&cursor, &registers);
  for (int frames = 0; frames < 64 && il_unwind_step(&unwinder, &cursor); frames++) (void)il_unwind_lookup_pc(&cursor);
}

static void probe(fuzz_memory *memory, const il_unwind_image *image) {
  il_memory reader = {.read = fuzz_read, .context = memory};
  il_cfi_row row;
  uint64_t span = image->text_end - image->text_start;
  for (uint64_t i = 0; i < 64 && span > 0; i++) {
    uint64_t pc = image->text_start + span / 64 * i;
    (void)il_cfi_find_row(&reader, image, pc, &row);
    if (i % 8 == 0) {
      if (image->address_size == 4) {
        walk(memory, image, IL_ARCH_I386, pc, 0);
        walk(memory, image, IL_ARCH_I386, pc, 1);  /* a Windows x86 minidump's walk (x86.rs's rules) */
      } else {
        walk(memory, image, IL_ARCH_X86_64, pc, 0);
        walk(memory, image, IL_ARCH_AARCH64, pc, 0);
      }
    }
  }
}

typedef struct {
  const il_cfi_section *section;
  const il_cfi_fde *fde;
  int count;
} rows_check;

/* Each row il_cfi_fde_rows gives in its one run is the row il_cfi_fde_row finds at its start. */
static int check_row(const il_cfi_row *row, void *context) {
  rows_check *check = context;
  il_cfi_row single;
  if (!il_cfi_fde_row(check->section, check->fde, row->location, &single)) __builtin_trap();
  if (single.location != row->location || single.end != row->end || single.cfa.kind != row->cfa.kind ||
      single.cfa.value != row->cfa.value || single.cfa.length != row->cfa.length || single.cfa_offset != row->cfa_offset ||
      single.ra_signed != row->ra_signed)
    __builtin_trap();
  for (int column = 0; column < IL_CFI_COLUMNS; column++) {
    const il_cfi_rule *a = &single.rules[column], *b = &row->rules[column];
    if (a->kind != b->kind || a->value != b->value || a->length != b->length) __builtin_trap();
  }
  return ++check->count < 64;
}

static void walk_entries(fuzz_memory *memory, uint64_t address, uint64_t size, int debug_frame, uint8_t address_size) {
  il_memory reader = {.read = fuzz_read, .context = memory};
  il_cfi_section section = {.memory = &reader, .address = address, .size = size, .debug_frame = debug_frame,
                            .address_size = address_size};
  uint64_t offset = 0;
  il_cfi_fde fde;
  il_cfi_row row;
  for (int entries = 0; entries < 4096; entries++) {
    int kind = il_cfi_next_entry(&section, &offset, &fde);
    if (kind <= 0) break;
    if (kind != 1) continue;
    (void)il_cfi_fde_row(&section, &fde, fde.pc_start, &row);
    (void)il_cfi_fde_row(&section, &fde, fde.pc_start + (fde.pc_end - fde.pc_start) / 2, &row);
    (void)il_cfi_fde_row(&section, &fde, fde.pc_end - 1, &row);
    rows_check check = {.section = &section, .fde = &fde, .count = 0};
    (void)il_cfi_fde_rows(&section, &fde, &row, check_row, &check);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz_memory memory;
  memset(&memory, 0, sizeof memory);
  memory.data = data;
  memory.size = size;
  for (int i = 0; i < STACK_WORDS; i++) {  /* the stack: the input's own words, so some point into it */
    uint64_t offset = size >= 8 ? (uint64_t)i * 8 % (size - 7) : 0;
    memory.stack[i] = size >= 8 ? le(data + offset, 8) : 0;
  }
  il_unwind_image image;
  memset(&image, 0, sizeof image);
  int elf64 = size >= 64 && memcmp(data, "\177ELF\2\1", 6) == 0;
  int elf32 = size >= 52 && memcmp(data, "\177ELF\1\1", 6) == 0;  /* little-endian ELF32: i386's layout */
  if (elf64 || elf32) {
    /* e_phoff, e_phentsize, e_phnum; then p_type, p_flags, p_offset, p_vaddr, p_filesz by class. */
    uint64_t entry = elf64 ? 56 : 32;
    int word = elf64 ? 8 : 4;
    uint64_t phoff = le(data + (elf64 ? 32 : 28), word), phentsize = le(data + (elf64 ? 54 : 42), 2),
             phnum = le(data + (elf64 ? 56 : 44), 2);
    image.text_start = UINT64_MAX;
    image.address_size = (uint8_t)word;
    for (uint64_t i = 0; i < phnum && phentsize == entry; i++) {
      if (phoff > size || i * entry > size - phoff || entry > size - phoff - i * entry) break;
      const uint8_t *header = data + phoff + i * entry;
      uint32_t type = (uint32_t)le(header, 4), flags = (uint32_t)le(header + (elf64 ? 4 : 24), 4);
      uint64_t offset = le(header + (elf64 ? 8 : 4), word), vaddr = le(header + (elf64 ? 16 : 8), word),
               filesz = le(header + (elf64 ? 32 : 16), word);
      if (type == 1 && memory.count < MAX_SEGMENTS && offset <= size && filesz <= size - offset) {
        memory.segments[memory.count].address = vaddr;
        memory.segments[memory.count].offset = offset;
        memory.segments[memory.count].size = filesz;
        memory.count++;
        if ((flags & 1) && vaddr < image.text_start) image.text_start = vaddr;
        if ((flags & 1) && vaddr + filesz > image.text_end) image.text_end = vaddr + filesz;
      }
      if (type == 0x6474E550u) image.eh_frame_hdr = vaddr;
    }
    if (image.text_start < image.text_end) probe(&memory, &image);
    return 0;
  }
  memory.segments[0].address = 0x10000;
  memory.segments[0].size = size;
  memory.count = 1;
  walk_entries(&memory, 0x10000, size, 0, 8);
  walk_entries(&memory, 0x10000, size, 1, 8);
  walk_entries(&memory, 0x10000, size, 0, 4);
  walk_entries(&memory, 0x10000, size, 1, 4);
  for (uint8_t address_size = 8; address_size >= 4; address_size -= 4) {
    image.address_size = address_size;
    image.text_start = 0;
    image.text_end = address_size == 4 ? 0x100000000ull : UINT64_MAX;
    image.eh_frame = 0x10000;
    image.eh_frame_size = size;
    image.eh_frame_hdr = 0;
    probe(&memory, &image);
    image.eh_frame = 0;
    image.eh_frame_hdr = 0x10000;
    probe(&memory, &image);
  }
  return 0;
}
