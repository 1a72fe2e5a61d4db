# i386 call frame directives (addresses of 4 bytes, data alignment -4, return address column 8) in
# .eh_frame and .debug_frame, for CallFrameTableTests against readelf. Never run.
	.cfi_sections .eh_frame, .debug_frame
	.text
	.globl	f
	.type	f, @function
f:
	.cfi_startproc
	pushl	%ebp
	.cfi_def_cfa_offset 8
	.cfi_offset %ebp, -8
	movl	%esp, %ebp
	.cfi_def_cfa_register %ebp
	pushl	%ebx
	.cfi_offset %ebx, -12
	.cfi_remember_state
	popl	%ebx
	.cfi_restore %ebx
	popl	%ebp
	.cfi_def_cfa %esp, 4
	ret
	.cfi_restore_state
	.cfi_escape 0x0f, 0x03, 0x74, 0x10, 0x06	# DW_CFA_def_cfa_expression: breg4 (esp) 16; deref
	nop
	.cfi_register %esi, %edi
	.cfi_val_offset %ebx, -20
	ret
	.cfi_endproc
	.size	f, .-f
	.section .note.GNU-stack,"",@progbits
