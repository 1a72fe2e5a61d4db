// Hand-written assembly as in dav1d (libavif): a function whose loop label is a symbol of its own in
// the object, so ld64.lld writes an LC_FUNCTION_STARTS entry for it but leaves the label out of the
// dylib's symbol table: a function start inside asm_sum's code, asm_sum (a local symbol) still named.
    .text
    .private_extern _asm_sum
    .globl _asm_sum
    .p2align 4
_asm_sum:
    xorl %eax, %eax
loop_top:
    addl %edi, %eax
    decl %edi
    jnz loop_top
    retq

    .globl _asm_after
    .p2align 4
_asm_after:
    movl $1, %eax
    retq
