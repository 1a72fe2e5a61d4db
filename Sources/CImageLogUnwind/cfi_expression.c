/* DWARF expressions (DW_OP_*) for CFA and register rules: a bounded stack machine over il_memory
   (step and depth caps, no recursion). See CImageLogUnwind.h for the contract. */
#include "unwind_internal.h"

/* ------------------------------------------------------------------ DWARF expressions */


/* Evaluates the expression at [address, address + length) in `memory` over `registers`, with `initial`
   pushed first when `push_initial`. The value on top at the end is the result. */
static int evaluate(const il_memory *code_memory, const il_memory *memory, uint64_t address, uint32_t length,
                    const il_register_set *registers, int push_initial, uint64_t initial, uint64_t *result) {
  /* The generic type is the address size: 32 bits for i386 and arm. Only the top of the stack is ever a new
     value, so wrapping it after each operation keeps every entry 32-bit. */
  int size = registers->arch == IL_ARCH_I386 || registers->arch == IL_ARCH_ARM ? 4 : 8;
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
