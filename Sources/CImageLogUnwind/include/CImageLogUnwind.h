#ifndef CIMAGELOG_UNWIND_H
#define CIMAGELOG_UNWIND_H
/* The one stack unwinder, shared by the crash handler (this process, at crash time), `imagelog pid
   --threads` (another process, through process_vm_readv) and core files (the core's segments and the
   files they map). Call frame information first (.eh_frame_hdr/.eh_frame as the loader mapped them;
   .debug_frame when a caller supplies it), then frame pointers where an image has no CFI for the pc,
   then stack scanning as the last resort, each frame marked with how it was found.

   Async-signal-safe by construction: no allocation, no locks, no errno, no libc but memcpy/memset;
   bounded work per step (instruction and expression steps are capped). Every byte of the unwound
   process is read through il_memory, which must never fault; nothing here dereferences a pointer it
   computed. */
#include <stddef.h>
#include <stdint.h>

typedef enum { IL_ARCH_X86_64 = 1, IL_ARCH_AARCH64 = 2, IL_ARCH_I386 = 3, IL_ARCH_ARM = 4 } il_arch;

/* DWARF register numbers, as the CFI names them.
   x86_64: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8..15 r8..r15, 16 rip (the
           return-address column).
   aarch64: 0..30 x0..x30 (29 is fp, 30 lr: the return-address column), 31 sp, 32 pc.
   i386:   0 eax, 1 ecx, 2 edx, 3 ebx, 4 esp, 5 ebp, 6 esi, 7 edi, 8 eip (the return-address column).
           Values are 32-bit, and every pointer the unwinder reads in the unwound process (saved
           registers, frame records, stack words, DW_OP_deref) is 4 bytes.
   arm:    0..15 r0..r15 (11 fp, 13 sp, 14 lr: the return-address column, 15 pc); 32-bit as i386. Walked
           offline only (a minidump): CFI, frame records only where arm_frame_pointers says so, scanning. */
enum {
  IL_REGISTER_COUNT = 33,
  IL_X86_64_RBP = 6, IL_X86_64_RSP = 7, IL_X86_64_RIP = 16,
  IL_I386_ESP = 4, IL_I386_EBP = 5, IL_I386_EIP = 8,
  IL_AARCH64_FP = 29, IL_AARCH64_LR = 30, IL_AARCH64_SP = 31, IL_AARCH64_PC = 32,
  IL_ARM_FP = 11, IL_ARM_SP = 13, IL_ARM_LR = 14, IL_ARM_PC = 15,
};

/* One frame's registers: value[n] is DWARF register n; bit n of `known` says it holds the value. */
typedef struct {
  il_arch arch;
  uint64_t known;
  uint64_t value[IL_REGISTER_COUNT];
} il_register_set;

/* How to read the unwound process's memory. `read` copies `length` bytes at `address` into `out` and
   returns 1, or returns 0 when any of them cannot be read; it never faults. */
typedef struct {
  int (*read)(void *context, uint64_t address, void *out, size_t length);
  void *context;
} il_memory;

/* Where an image's call frame information is, for a pc inside it. Addresses are run-time addresses in
   the unwound process, read through the unwinder's memory. */
typedef struct {
  uint64_t text_start, text_end;  /* the image's executable range: a return address must be inside one */
  uint64_t load_bias;             /* run-time minus link-time address */
  uint64_t eh_frame_hdr;          /* PT_GNU_EH_FRAME's run-time address; 0 when none */
  uint64_t eh_frame;              /* .eh_frame's run-time address when there is no usable header; 0: unknown */
  uint64_t eh_frame_size;         /* its size in bytes, with eh_frame */
  /* .debug_frame (offline only): its bytes at debug_frame in debug_frame_memory (another il_memory,
     a file's bytes), FDE addresses link-time (load_bias is added). debug_frame_memory NULL: none. */
  const il_memory *debug_frame_memory;
  uint64_t debug_frame, debug_frame_size;
  uint8_t address_size;           /* 4 for a 32-bit image; 0 or 8: 64-bit (il_unwind_step sets it from the
                                     registers' architecture) */
} il_unwind_image;

/* What the unwinder is given: the memory and a way to find the image that holds a pc (1 when found). */
typedef struct {
  il_memory memory;
  int (*find_image)(void *context, uint64_t pc, il_unwind_image *image);
  void *find_context;
  uint64_t scan_bytes;            /* how far above the stack pointer the last resort looks for a return
                                     address; 0: never scan */
  int without_code;               /* 1: where the code before a return address cannot be read (a minidump
                                     without the module's file), walk as minidump-stackwalk does: a frame
                                     record checked against the stack, a scanned word inside a module
                                     within Breakpad's window. 0: such a word is never a return address.
                                     Readable code is held to the call check either way. */
  /* With without_code: 0 when `address` lies in a module whose symbols name no function there (a
     scanned word there is no return address, as Breakpad's InstructionAddressSeemsValid says); NULL:
     every address in a module will do. Called with find_context. */
  int (*names_address)(void *context, uint64_t address);
  /* arm: 1 to take r11's frame records ([r11] the caller's r11, [r11 + 4] its pc), as minidump-stackwalk's
     arm.rs does on iOS only (elsewhere lr and r11 may be any register); 0: CFI and scanning only. */
  int arm_frame_pointers;
  /* aarch64 with without_code: the bits of a pointer that are address, as minidump-stackwalk's arm64.rs
     strips pointer-authentication bits (ptr_auth_strip) from a frame record's pc and fp and from what
     CFI gives for pc, lr and x29; 0: nothing is stripped. */
  uint64_t pointer_mask;
  /* x86_64 with without_code: 1 to take no rbp frame record, as minidump-stackwalk 0.25's amd64.rs takes
     none on Windows (there rbp may point into the middle of a frame: only UNWIND_INFO says where);
     0: frame records are taken. */
  int no_x86_64_frame_records;
} il_unwinder;

/* How a frame was found (Breakpad's "trust"). */
typedef enum {
  IL_FRAME_CONTEXT = 0,           /* frame 0: the registers the cursor started from */
  IL_FRAME_CFI = 1,               /* call frame information */
  IL_FRAME_FRAME_POINTER = 2,     /* the previous frame's frame record */
  IL_FRAME_SCAN = 3,              /* a word on the stack that looks like a return address: may be stale */
} il_frame_trust;

typedef struct {
  il_register_set registers;      /* this frame's registers; the pc is always known */
  il_frame_trust trust;
  int pc_is_exact;                /* 1: pc is where the frame was interrupted (frame 0, or the frame a
                                     signal interrupted); 0: a return address (look up pc - 1) */
  /* private to the unwinder */
  uint64_t floor;                 /* no caller's frame lies below this stack address */
  int steps;
  uint64_t cfa;                   /* the last CFI step's CFA: the same one twice is a loop */
} il_unwind_cursor;

/* Starts a walk at `registers` (frame 0: pc and sp at least). */
void il_unwind_start(il_unwind_cursor *cursor, const il_register_set *registers);

/* Moves the cursor to its caller's frame. Returns 1 when it moved, 0 at the end of the stack (the
   outermost frame, or no caller any method trusts). CFI when the pc's image has an FDE for it (a
   signal frame's CIE 'S' augmentation marks the caller's pc exact); frame pointers when it does not;
   scanning (cursor->trust IL_FRAME_SCAN) only when both fail. Never moves below the floor: the walk
   ends. */
int il_unwind_step(const il_unwinder *unwinder, il_unwind_cursor *cursor);

/* Moves the cursor to `next`, a caller found by the unwinder's user (a Windows x86 module's STACK WIN
   records, evaluated outside), with `trust`; its pc is a return address. Returns 0 (the cursor unmoved)
   when `next` lacks a pc or stack pointer or the cursor has taken its most steps. The user checks that
   the frame is progress. */
int il_unwind_move(il_unwind_cursor *cursor, const il_register_set *next, il_frame_trust trust);

/* The address to symbolicate the cursor's frame by: pc, or pc - 1 for a return address (pc - 2 on arm,
   whose thumb return addresses are odd). */
uint64_t il_unwind_lookup_pc(const il_unwind_cursor *cursor);

/* ------------------------------------------------------------------ call frame information, directly
   The CFI engine under il_unwind_step, for tests and offline readers: one FDE's rows, as
   `readelf --debug-dump=frames-interp` prints them. */

enum {
  IL_CFI_COLUMNS = 97,            /* registers 0..96 get rules (x86_64's xmm0-15 are 17..32, aarch64's
                                     v0-v31 64..95); a rule for a higher column is ignored */
  IL_CFI_STATE_DEPTH = 6,         /* DW_CFA_remember_state nesting (compilers use one or two levels) */
};

typedef enum {
  IL_RULE_NONE = 0,               /* no rule: the ABI decides (callee-saved registers keep their value) */
  IL_RULE_UNDEFINED,              /* DW_CFA_undefined */
  IL_RULE_SAME_VALUE,             /* DW_CFA_same_value */
  IL_RULE_OFFSET,                 /* saved at CFA + value */
  IL_RULE_VAL_OFFSET,             /* is CFA + value */
  IL_RULE_REGISTER,               /* in register `value` */
  IL_RULE_EXPRESSION,             /* saved at the address the expression at `value` (`length` bytes) computes */
  IL_RULE_VAL_EXPRESSION,         /* is what the expression computes */
} il_cfi_rule_kind;

typedef struct {
  int64_t value;                  /* offset, register, or the expression's address (as il_memory reads it) */
  uint32_t length;                /* an expression's length */
  uint8_t kind;                   /* il_cfi_rule_kind */
} il_cfi_rule;

typedef struct {
  uint64_t location, end;         /* the row holds for pcs in [location, end) */
  il_cfi_rule cfa;                /* IL_RULE_REGISTER (register `cfa.value` + cfa_offset) or IL_RULE_VAL_EXPRESSION */
  int64_t cfa_offset;
  uint64_t return_address_register;
  uint8_t signal_frame;           /* CIE augmentation 'S' */
  uint8_t ra_signed;              /* AArch64: DW_CFA_AARCH64_negate_ra_state toggled an odd number of times */
  il_cfi_rule rules[IL_CFI_COLUMNS];
} il_cfi_row;

/* A section of call frame entries: `size` bytes at `address` in `memory`. */
typedef struct {
  const il_memory *memory;
  uint64_t address, size;
  int debug_frame;                /* 1: .debug_frame (CIE id 0xffffffff, absolute addresses + load_bias) */
  uint64_t load_bias;             /* .debug_frame only */
  uint8_t address_size;           /* 8 or 4 */
} il_cfi_section;

/* One FDE as il_cfi_next_entry finds it. */
typedef struct {
  uint64_t offset;                /* its offset in the section */
  uint64_t pc_start, pc_end;
  uint64_t instructions, instructions_end;  /* the addresses of its instructions */
  uint64_t cie;                   /* its CIE's address */
} il_cfi_fde;

/* Reads the entry at section offset `*offset` and moves `*offset` past it. Returns 1 for an FDE (filled
   in), 2 for a CIE, 0 at the end (terminator or section end), -1 when the entry is malformed. */
int il_cfi_next_entry(const il_cfi_section *section, uint64_t *offset, il_cfi_fde *fde);

/* The row of `fde` that holds `pc` (1), or 0 when pc is outside it or its instructions are malformed.
   Rules come back unevaluated. */
int il_cfi_fde_row(const il_cfi_section *section, const il_cfi_fde *fde, uint64_t pc, il_cfi_row *row);

/* Every row of `fde` in order, from one run of its instructions (il_cfi_fde_row runs them from the start
   for each pc): `each(row, context)` for each, filled into `*row`; a zero from `each` stops the walk.
   1 when the rows were given, 0 when the instructions are malformed (rows before the fault were given). */
int il_cfi_fde_rows(const il_cfi_section *section, const il_cfi_fde *fde, il_cfi_row *row,
                    int (*each)(const il_cfi_row *row, void *context), void *context);

/* The row for `pc` in `image`, found the way il_unwind_step finds it (.eh_frame_hdr's binary search,
   else a walk of .eh_frame, then .debug_frame). 1 when found. */
int il_cfi_find_row(const il_memory *memory, const il_unwind_image *image, uint64_t pc, il_cfi_row *row);

/* Evaluates the DWARF expression of `length` bytes at `address` in `code` (CFI's subset: literals,
   constants, breg/bregx/reg/regx over `registers`, stack operations, deref/deref_size through `memory`,
   arithmetic, logic, comparisons, skip/bra, nop), with `initial` pushed first when `push_initial`.
   1 with the value on top in *result; 0 when malformed, a register is unknown or memory unreadable.
   For i386 registers the expression's generic type is 32 bits (DW_OP_addr and deref read 4 bytes;
   values wrap at 32 bits; signed operations see 32-bit signs). */
int il_cfi_evaluate(const il_memory *code, const il_memory *memory, uint64_t address, uint32_t length,
                    const il_register_set *registers, int push_initial, uint64_t initial, uint64_t *result);

/* True when the bytes before `address` end in an x86 call instruction (E8 rel32, or FF /2 in its
   register and memory forms, 2 to 7 bytes with or without a REX prefix): a stack word that is a return
   address, not a stale code pointer. The same bytes are the same calls in 32-bit code (i386), where
   ModRM's disp32 form is absolute instead of rip-relative but just as long. */
int il_x86_64_follows_call(const il_memory *memory, uint64_t address);

#endif
