/* The one stack unwinder: call frame information (.eh_frame_hdr / .eh_frame / .debug_frame), then frame
   pointers, then stack scanning. See CImageLogUnwind.h for the contract.

   Async-signal-safe: no allocation, no locks, no errno, no libc but memcpy/memset; every byte of the
   unwound process comes through il_memory; every loop has a bound that does not depend on the data
   (instruction, expression-step, entry and step caps); nothing recurses. Any malformed byte makes the
   method in use give up for this frame (the next method, or the end of the stack), never a fault. */
#include "unwind_internal.h"

/* ------------------------------------------------------------------ one step */

static int sp_register(il_arch arch) {
  return arch == IL_ARCH_AARCH64 ? IL_AARCH64_SP : arch == IL_ARCH_I386 ? IL_I386_ESP : arch == IL_ARCH_ARM ? IL_ARM_SP : IL_X86_64_RSP;
}
static int pc_register(il_arch arch) {
  return arch == IL_ARCH_AARCH64 ? IL_AARCH64_PC : arch == IL_ARCH_I386 ? IL_I386_EIP : arch == IL_ARCH_ARM ? IL_ARM_PC : IL_X86_64_RIP;
}
static int fp_register(il_arch arch) {
  return arch == IL_ARCH_AARCH64 ? IL_AARCH64_FP : arch == IL_ARCH_I386 ? IL_I386_EBP : arch == IL_ARCH_ARM ? IL_ARM_FP : IL_X86_64_RBP;
}
/* The size of a pointer (and of a stack word) in the unwound process. */
static int word_size(il_arch arch) { return arch == IL_ARCH_I386 || arch == IL_ARCH_ARM ? 4 : 8; }

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

/* il_x86_64_follows_call, telling "no call before it" (0) from "the code cannot be read" (-1). */
static int follows_call(const il_memory *memory, uint64_t address) {
  uint8_t bytes[8];
  if (address < 8 || !memory_read(memory, address - 8, bytes, sizeof bytes)) return -1;
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

int il_x86_64_follows_call(const il_memory *memory, uint64_t address) { return follows_call(memory, address) == 1; }

/* What plausible_return found. */
enum { RETURN_NO = 0, RETURN_AFTER_CALL = 1, RETURN_WITHOUT_CODE = 2 };

/* A plausible return address: in some image's text and, on x86, just after a call. When the code before
   it cannot be read (a minidump without the module's file) and the walk follows minidump-stackwalk
   (unwinder->without_code), being inside a module is all that can be checked: RETURN_WITHOUT_CODE, as
   Breakpad's processor accepts it. Code that can be read is always held to the call check. */
static int plausible_return(const il_unwinder *unwinder, il_arch arch, uint64_t address) {
  il_unwind_image image;
  if (address < 2 || !image_for(unwinder, address - 1, &image)) return RETURN_NO;
  if (arch == IL_ARCH_X86_64 || arch == IL_ARCH_I386) {
    int call = follows_call(&unwinder->memory, address);
    if (call < 0) return unwinder->without_code ? RETURN_WITHOUT_CODE : RETURN_NO;
    return call ? RETURN_AFTER_CALL : RETURN_NO;
  }
  if (arch == IL_ARCH_AARCH64) {
    /* Without the code (a dump without the module's file), arm64.rs's instruction_seems_valid: any
       address in a module, aligned or not. */
    uint8_t code[4];
    if (unwinder->without_code && !memory_read(&unwinder->memory, address - 4, code, 4)) return RETURN_WITHOUT_CODE;
    return address % 4 == 0 ? RETURN_AFTER_CALL : RETURN_NO;
  }
  /* arm is walked from dumps only, whose code is not read: arm.rs's instruction_seems_valid. */
  if (arch == IL_ARCH_ARM && unwinder->without_code) return RETURN_WITHOUT_CODE;
  return RETURN_AFTER_CALL;
}

/* x86_64's canonical addresses (48 bits, bit 47 copied above): nothing else can be a pc. */
static int canonical(il_arch arch, uint64_t address) {
  return arch != IL_ARCH_X86_64 || address <= 0x7FFFFFFFFFFFull || address >= 0xFFFF800000000000ull;
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
    if (!il_cfi_evaluate(code_memory, memory, (uint64_t)row->cfa.value, row->cfa.length, from, 0, 0, &cfa)) return 0;
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
      if (!il_cfi_evaluate(code_memory, memory, (uint64_t)rule->value, rule->length, from, 1, cfa, &computed) ||
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

/* A scanned caller's frame pointer, as minidump-stackwalk's x86 and amd64 scans recover it: the word
   below the return address when fp points at it (a standard prologue pushed it) and it points above,
   within 128 KiB and readable; else fp itself when it is at or above the caller's sp (the function kept
   the caller's); else unknown. */
static void scanned_frame_pointer(const il_unwinder *unwinder, const il_register_set *from, il_register_set *next,
                                  uint64_t index, uint64_t at, int size) {
  int fp = fp_register(from->arch);
  uint64_t caller_sp = at + (uint64_t)size, saved, probe;
  next->known &= ~(1ull << fp);
  if (index == 0 || !known(from, fp)) return;
  uint64_t last = from->value[fp], slot = at - (uint64_t)size;
  if (last == slot) {
    if (read_pointer(&unwinder->memory, slot, size, &saved) && saved > at && saved - slot <= 128 * 1024 &&
        read_pointer(&unwinder->memory, saved, size, &probe))
      set_register(next, fp, saved);
  } else if (last >= caller_sp) {
    set_register(next, fp, last);
  }
}

static int accept(il_unwind_cursor *cursor, const il_register_set *next, il_frame_trust trust, int exact,
                  int crossing_signal, uint64_t cfa);

/* The frame record at `from`'s frame pointer, as the stackwalkers read one: 1 with its address in
   *frame, the saved frame pointer in record[0] and the return address in record[1]; 0 when the frame
   pointer is 0 and `zero_ends` (arm.rs and arm64.rs end the walk there); -1 when it is unknown or the
   record cannot be read. */
static int frame_record(const il_unwinder *unwinder, const il_register_set *from, int zero_ends, uint64_t *frame,
                        uint64_t record[2]) {
  int fp = fp_register(from->arch), size = word_size(from->arch);
  uint64_t top = size == 4 ? 0xFFFFFFFFu : UINT64_MAX;
  if (!known(from, fp)) return -1;
  *frame = from->value[fp];
  if (*frame == 0 && zero_ends) return 0;
  if (*frame >= top - 2 * (uint64_t)size || !read_pointer(&unwinder->memory, *frame, size, &record[0]) ||
      !read_pointer(&unwinder->memory, *frame + (uint64_t)size, size, &record[1]))
    return -1;
  return 1;
}

/* Moves the cursor to the caller a frame record gives: its frame pointer, pc and sp (past the record),
   nothing else known, as the stackwalkers' frame-pointer callers. 1: moved; 0: the walk ends there. */
static int take_frame_record(il_unwind_cursor *cursor, uint64_t frame, const uint64_t record[2]) {
  il_arch arch = cursor->registers.arch;
  il_register_set next;
  memset(&next, 0, sizeof next);
  next.arch = arch;
  set_register(&next, fp_register(arch), record[0]);
  set_register(&next, sp_register(arch), frame + 2 * (uint64_t)word_size(arch));
  set_register(&next, pc_register(arch), record[1]);
  return accept(cursor, &next, IL_FRAME_FRAME_POINTER, 0, 0, 0);
}

/* An arm caller's registers after CFI, as arm.rs's CfiStackWalker leaves them: what a rule gave, the
   callee-saved r4-r11 forwarded, sp and pc; the scratch registers (r0-r3, r12) and lr without a rule
   are unknown in the caller (a later rule reading them fails, as it does there). */
static void arm_caller_registers(const il_cfi_row *row, il_register_set *next) {
  static const int scratch[] = {0, 1, 2, 3, 12, IL_ARM_LR};
  for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++) {
    int reg = scratch[i];
    if (row->rules[reg].kind == IL_RULE_NONE && (uint64_t)reg != row->return_address_register)
      next->known &= ~(1ull << reg);
  }
}

/* An arm frame record, as arm.rs reads one where it trusts them (iOS): [r11] the caller's r11, [r11 + 4]
   its pc, its sp r11 + 8, checked against nothing but the walk's own rules; r11 0 ends the walk. 1:
   moved; 0: the walk ends; -1: no record to read (the other methods decide). */
static int arm_frame_record(const il_unwinder *unwinder, il_unwind_cursor *cursor) {
  uint64_t frame, record[2];
  int read = frame_record(unwinder, &cursor->registers, 1, &frame, record);
  if (read <= 0) return read;
  if (record[1] < 4096) return 0;
  return take_frame_record(cursor, frame, record);
}

/* A pointer without its pointer-authentication bits (unwinder->pointer_mask; 0: as it is). */
static uint64_t strip_authentication(const il_unwinder *unwinder, uint64_t pointer) {
  return unwinder->pointer_mask != 0 ? pointer & unwinder->pointer_mask : pointer;
}

/* An aarch64 frame record whose return address's code cannot be read, as arm64.rs reads one: [x29] the
   caller's x29, [x29 + 8] its pc (which must lie in 0x1000..=0xfffffffffffff), both without their
   pointer-authentication bits (unwinder->pointer_mask), its sp x29 + 16 and its lr
   the next record's pc; x29 0 ends the walk. Nothing else is checked: a pc outside every module is a
   frame. 1: moved; 0: the walk ends; -1: no such record (readable code, or none): the other methods. */
static int aarch64_frame_record_without_code(const il_unwinder *unwinder, il_unwind_cursor *cursor) {
  uint64_t frame, record[2], lr;
  int read = frame_record(unwinder, &cursor->registers, 1, &frame, record);
  if (read <= 0) return read;
  record[0] = strip_authentication(unwinder, record[0]);
  record[1] = strip_authentication(unwinder, record[1]);
  if (record[1] < 0x1000 || record[1] > 0x000FFFFFFFFFFFFFull) return -1;
  if (plausible_return(unwinder, IL_ARCH_AARCH64, record[1]) == RETURN_AFTER_CALL) return -1;
  /* The caller's lr: the next record's return address, read before the cursor moves. */
  int has_lr = record[0] != 0 && record[0] <= UINT64_MAX - 16 && read_pointer(&unwinder->memory, record[0] + 8, 8, &lr);
  if (!take_frame_record(cursor, frame, record)) return 0;
  if (has_lr) set_register(&cursor->registers, IL_AARCH64_LR, strip_authentication(unwinder, lr));
  return 1;
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
  if (cursor->pc_is_exact || pc == 0) return pc;
  /* arm: a thumb return address is odd (the mode bit), so pc - 1 is the instruction after the call;
     pc - 2 is inside the call in either mode (arm.rs looks rules up there). */
  return cursor->registers.arch == IL_ARCH_ARM && pc >= 2 ? pc - 2 : pc - 1;
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

static int step_i386_without_code(const il_unwinder *unwinder, il_unwind_cursor *cursor);

int il_unwind_step(const il_unwinder *unwinder, il_unwind_cursor *cursor) {
  if (cursor->steps >= MAX_STEPS) return 0;
  cursor->steps++;
  il_register_set *from = &cursor->registers;
  il_arch arch = from->arch;
  if (arch != IL_ARCH_X86_64 && arch != IL_ARCH_AARCH64 && arch != IL_ARCH_I386 && arch != IL_ARCH_ARM) return 0;
  int sp = sp_register(arch), pc = pc_register(arch), fp = fp_register(arch), size = word_size(arch);
  if (!known(from, pc) || !known(from, sp)) return 0;
  if (arch == IL_ARCH_I386 && unwinder->without_code) return step_i386_without_code(unwinder, cursor);
  uint64_t lookup = il_unwind_lookup_pc(cursor);
  il_register_set next;
  il_unwind_image image;
  int in_image = image_for(unwinder, lookup, &image);
  if (arch == IL_ARCH_I386 || arch == IL_ARCH_ARM) image.address_size = 4;  /* a 32-bit thread runs 32-bit code */

  /* 1. Call frame information. */
  if (in_image) {
    il_cfi_row row;
    il_cfi_section section;
    if (il_cfi_find_section_row(&unwinder->memory, &image, lookup, &row, &section)) {
      uint64_t cfa;
      if (apply_row(unwinder, &row, section.memory, from, &next, &cfa)) {
        if (arch == IL_ARCH_ARM) arm_caller_registers(&row, &next);
        if (arch == IL_ARCH_AARCH64 && unwinder->without_code) {
          static const int signed_registers[] = {IL_AARCH64_PC, IL_AARCH64_LR, IL_AARCH64_FP};
          for (size_t i = 0; i < sizeof signed_registers / sizeof signed_registers[0]; i++)
            if (known(&next, signed_registers[i]))
              next.value[signed_registers[i]] = strip_authentication(unwinder, next.value[signed_registers[i]]);
        }
        /* amd64.rs: a caller's pc in the first page, or a stack pointer not above the callee's (CFI's
           result is not checked otherwise), ends the walk; no other method is tried. */
        if (arch == IL_ARCH_X86_64 && unwinder->without_code && !row.signal_frame &&
            ((known(&next, pc) && next.value[pc] < 4096) || (known(&next, sp) && next.value[sp] <= from->value[sp])))
          return 0;
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
    int found = caller != 0 ? plausible_return(unwinder, arch, caller) : RETURN_NO;
    /* aarch64 without the code: arm64.rs has no such step (lr may be anything); its frame records and
       scanning decide. */
    if (found != RETURN_NO && !(arch == IL_ARCH_AARCH64 && found == RETURN_WITHOUT_CODE)) {
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

  /* 5c. aarch64 without the code: arm64.rs's frame records. */
  if (arch == IL_ARCH_AARCH64 && unwinder->without_code) {
    int taken = aarch64_frame_record_without_code(unwinder, cursor);
    if (taken >= 0) return taken;
  }

  /* 5b. arm: frame records only where the caller trusts them (arm.rs: iOS); never the generic ones. */
  if (arch == IL_ARCH_ARM && unwinder->arm_frame_pointers) {
    int taken = arm_frame_record(unwinder, cursor);
    if (taken >= 0) return taken;
  }

  /* 5. Frame pointers: [fp] the caller's fp, [fp + word] the return address (i386: ebp, [ebp + 4]).
     A return address whose code cannot be read is held to minidump-stackwalk's checks of the record
     instead (amd64.rs/x86.rs get_caller_by_frame_pointer): the caller's fp at or above its sp and
     readable, its sp readable, a canonical pc past the first page. */
  int frame_records = !(arch == IL_ARCH_X86_64 && unwinder->without_code && unwinder->no_x86_64_frame_records);
  if (arch != IL_ARCH_ARM && frame_records && known(from, fp)) {
    uint64_t frame = from->value[fp], record[2], probe;
    int found = 0;
    if (frame % (uint64_t)size == 0 && frame >= cursor->floor && frame >= from->value[sp] &&
        read_pointer(&unwinder->memory, frame, size, &record[0]) &&
        read_pointer(&unwinder->memory, frame + (uint64_t)size, size, &record[1]))
      found = plausible_return(unwinder, arch, record[1]);
    if (found == RETURN_WITHOUT_CODE) {
      uint64_t caller_sp = frame + 2 * (uint64_t)size;
      if (record[0] < caller_sp || record[1] < 4096 || !canonical(arch, record[1]) ||
          !read_pointer(&unwinder->memory, record[0], size, &probe) ||
          !read_pointer(&unwinder->memory, caller_sp, size, &probe))
        found = RETURN_NO;
    }
    if (found != RETURN_NO) {
      next = *from;
      set_register(&next, fp, record[0]);
      set_register(&next, sp, wrap(frame + 2 * (uint64_t)size, size));
      set_register(&next, pc, record[1]);
      if (arch == IL_ARCH_AARCH64) set_register(&next, IL_AARCH64_LR, record[1]);
      if (accept(cursor, &next, IL_FRAME_FRAME_POINTER, 0, 0, 0)) return 1;
    }
  }

  /* 6. Stack scanning: the first word above sp that looks like a return address. A word whose code cannot
     be read counts only inside minidump-stackwalk's window (40 words, 160 from frame 0 or a CFI frame:
     Breakpad's kRASearchWords, longer where the callee is trusted), and gets its frame pointer as
     amd64.rs/x86.rs get_caller_by_scan recover it. */
  uint64_t words = unwinder->scan_bytes / (uint64_t)size;
  uint64_t breakpad_words = cursor->trust == IL_FRAME_CONTEXT || cursor->trust == IL_FRAME_CFI ? 160 : 40;
  uint64_t start = from->value[sp];
  if (start % (uint64_t)size != 0) start = (start + (uint64_t)size - 1) & ~((uint64_t)size - 1);
  if (unwinder->without_code && words < breakpad_words) words = breakpad_words;
  for (uint64_t i = 0; i < words; i++) {
    uint64_t at = start + i * (uint64_t)size, word;
    if (at < start) break;
    if (!read_pointer(&unwinder->memory, at, size, &word)) break;
    int found = plausible_return(unwinder, arch, word);
    if (found == RETURN_NO) continue;
    if (found == RETURN_WITHOUT_CODE && (i >= breakpad_words || word < 4096 || !canonical(arch, word) ||
                                         (unwinder->names_address != NULL &&
                                          !unwinder->names_address(unwinder->find_context, word - 1))))
      continue;
    /* With the code read, a copy of a scanned frame's own pc is a stale copy (a call check passed twice).
       Without it minidump-stackwalk takes the word (the same return address saved twice is no rarer
       than a stale one): so does this walk. */
    if (found == RETURN_AFTER_CALL && cursor->trust == IL_FRAME_SCAN && word == from->value[pc]) continue;
    next = *from;
    set_register(&next, sp, wrap(at + (uint64_t)size, size));
    set_register(&next, pc, word);
    if (arch == IL_ARCH_AARCH64) next.known &= ~(1ull << IL_AARCH64_LR);
    if (arch == IL_ARCH_ARM) next.known = (1ull << IL_ARM_SP) | (1ull << IL_ARM_PC);  /* arm.rs: pc and sp only */
    if (arch == IL_ARCH_AARCH64 && found == RETURN_WITHOUT_CODE)  /* arm64.rs: pc and sp only */
      next.known = (1ull << IL_AARCH64_SP) | (1ull << IL_AARCH64_PC);
    if (found == RETURN_WITHOUT_CODE && arch == IL_ARCH_X86_64) scanned_frame_pointer(unwinder, from, &next, i, at, size);
    if (accept(cursor, &next, IL_FRAME_SCAN, 0, 0, 0)) return 1;
  }
  return 0;
}

/* ------------------------------------------------------------------ i386 as minidump-stackwalk walks it

   A 32-bit x86 thread of a minidump (without_code) is walked as rust-minidump's x86.rs walks it, which
   Windows x86 dumps need: CFI (a module's STACK CFI; the STACK WIN records come before this step, from
   the caller of il_unwind_step), else the frame record at ebp taken as it is (no check that the return
   address is in a module: Windows system code without symbols is walked through by its ebp chain), else
   a scan of 40 words (160 from frame 0 or a CFI frame) for a word in a module's text, which a module
   with symbols must name; the caller's ebp recovered as x86.rs recovers it. Code that can be read (a
   module's file at hand) still holds a frame record's return address and a scanned word to the call
   check. Whatever method gives a frame, a pc in the first page or a stack pointer that did not move up
   ends the walk (no other method is tried). Only the
   registers each method gives are known in the caller: CFI keeps the callee-saved ones (ebx, ebp, esi,
   edi) where the rules do not say otherwise; a frame record or a scan gives eip, esp and ebp. */

static int i386_readable(const il_unwinder *unwinder, uint64_t address) {
  uint64_t probe;
  return read_pointer(&unwinder->memory, address, 4, &probe);
}

static int step_i386_without_code(const il_unwinder *unwinder, il_unwind_cursor *cursor) {
  const il_register_set *from = &cursor->registers;
  const uint64_t esp = from->value[IL_I386_ESP];
  il_register_set next;
  il_frame_trust trust = IL_FRAME_CFI;
  int found = 0;
  uint64_t lookup = il_unwind_lookup_pc(cursor);
  il_unwind_image image;
  if (image_for(unwinder, lookup, &image)) {
    il_cfi_row row;
    il_cfi_section section;
    image.address_size = 4;
    uint64_t cfa;
    if (il_cfi_find_section_row(&unwinder->memory, &image, lookup, &row, &section) &&
        apply_row(unwinder, &row, section.memory, from, &next, &cfa)) {
      /* x86.rs forwards the callee-saved registers only (and what the rules set). */
      const uint64_t kept = (1ull << 3) | (1ull << 4) | (1ull << 5) | (1ull << 6) | (1ull << 7) | (1ull << IL_I386_EIP);
      for (int reg = 0; reg < IL_REGISTER_COUNT; reg++) {
        if (!((kept >> reg) & 1) && row.rules[reg].kind == IL_RULE_NONE) next.known &= ~(1ull << reg);
      }
      found = 1;
    }
  }
  if (!found && known(from, IL_I386_EBP)) {
    uint64_t bp = from->value[IL_I386_EBP], caller_pc, caller_bp;
    /* Code that can be read still decides: a return address not after a call is no frame record's. */
    if (bp < 0xFFFFFFFFull - 8 && read_pointer(&unwinder->memory, bp + 4, 4, &caller_pc) &&
        read_pointer(&unwinder->memory, bp, 4, &caller_bp) && follows_call(&unwinder->memory, caller_pc) != 0) {
      memset(&next, 0, sizeof next);
      next.arch = IL_ARCH_I386;
      set_register(&next, IL_I386_EIP, caller_pc);
      set_register(&next, IL_I386_ESP, bp + 8);
      set_register(&next, IL_I386_EBP, caller_bp);
      trust = IL_FRAME_FRAME_POINTER;
      found = 1;
    }
  }
  if (!found) {
    uint64_t words = cursor->trust == IL_FRAME_CONTEXT || cursor->trust == IL_FRAME_CFI ? 160 : 40;
    for (uint64_t i = 0; i < words && !found; i++) {
      uint64_t at = esp + i * 4, word;
      if (at > 0xFFFFFFFFull || !read_pointer(&unwinder->memory, at, 4, &word)) break;
      int plausible = plausible_return(unwinder, IL_ARCH_I386, word);
      if (plausible == RETURN_NO) continue;
      if (plausible == RETURN_WITHOUT_CODE && unwinder->names_address != NULL &&
          !unwinder->names_address(unwinder->find_context, word - 1))
        continue;
      memset(&next, 0, sizeof next);
      next.arch = IL_ARCH_I386;
      set_register(&next, IL_I386_EIP, word);
      set_register(&next, IL_I386_ESP, at + 4);
      if (i > 0) {
        uint64_t bp;
        if (!read_pointer(&unwinder->memory, at - 4, 4, &bp)) return 0;  /* x86.rs gives up the scan */
        if (bp > at && bp - (at - 4) <= 128 * 1024) {
          if (i386_readable(unwinder, bp)) set_register(&next, IL_I386_EBP, bp);
        } else if (known(from, IL_I386_EBP) && from->value[IL_I386_EBP] >= at + 4 &&
                   i386_readable(unwinder, from->value[IL_I386_EBP])) {
          set_register(&next, IL_I386_EBP, from->value[IL_I386_EBP]);
        }
      }
      trust = IL_FRAME_SCAN;
      found = 1;
    }
  }
  if (!found || !known(&next, IL_I386_EIP) || !known(&next, IL_I386_ESP)) return 0;
  if (next.value[IL_I386_EIP] < 4096 || next.value[IL_I386_ESP] <= esp) return 0;
  cursor->registers = next;
  cursor->trust = trust;
  cursor->pc_is_exact = 0;
  cursor->cfa = 0;
  if (next.value[IL_I386_ESP] > cursor->floor) cursor->floor = next.value[IL_I386_ESP];
  return 1;
}

int il_unwind_move(il_unwind_cursor *cursor, const il_register_set *next, il_frame_trust trust) {
  int sp = sp_register(cursor->registers.arch);
  if (cursor->steps >= MAX_STEPS || !known(next, sp) || !known(next, pc_register(cursor->registers.arch))) return 0;
  cursor->steps++;
  cursor->registers = *next;
  cursor->trust = trust;
  cursor->pc_is_exact = 0;
  cursor->cfa = 0;
  if (next->value[sp] > cursor->floor) cursor->floor = next->value[sp];
  return 1;
}
