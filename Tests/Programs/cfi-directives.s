# Every call frame directive GAS has for x86-64, and the DW_CFA_* operations it has no directive for
# (through .cfi_escape), in .eh_frame and .debug_frame both. CallFrameTableTests compares our rows for
# this file with readelf --debug-dump=frames-interp. Never run: only its unwind tables matter.
	.cfi_sections .eh_frame, .debug_frame
	.text

	.globl	frame_pointer
	.type	frame_pointer, @function
frame_pointer:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	pushq	%rbx
	.cfi_rel_offset %rbx, -24
	testq	%rdi, %rdi
	.cfi_remember_state
	popq	%rbx
	.cfi_restore %rbx
	popq	%rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_restore_state
	.skip	300, 0x90		# advance_loc2
	nop
	.cfi_adjust_cfa_offset 8
	nop
	.cfi_adjust_cfa_offset -8
	ret
	.cfi_endproc
	.size	frame_pointer, .-frame_pointer

	.globl	register_rules
	.type	register_rules, @function
register_rules:
	.cfi_startproc
	nop
	.cfi_register %r12, %r13
	.cfi_undefined %r14
	.cfi_same_value %r15
	.cfi_val_offset %rbx, -32
	nop
	.cfi_escape 0x11, 0x03, 0x7e		# DW_CFA_offset_extended_sf rbx, -2 (x -8 = 16)
	.cfi_escape 0x2f, 0x0c, 0x02		# DW_CFA_GNU_negative_offset_extended r12, 2
	.cfi_escape 0x15, 0x0d, 0x7f		# DW_CFA_val_offset_sf r13, -1
	.cfi_escape 0x05, 0x0e, 0x03		# DW_CFA_offset_extended r14, 3
	.cfi_escape 0x2e, 0x10			# DW_CFA_GNU_args_size 16
	nop
	.cfi_escape 0x06, 0x0e			# DW_CFA_restore_extended r14
	.cfi_escape 0x12, 0x07, 0x7e		# DW_CFA_def_cfa_sf rsp, -2
	.cfi_escape 0x13, 0x7d			# DW_CFA_def_cfa_offset_sf -3
	.cfi_escape 0x00			# DW_CFA_nop
	nop
	.cfi_escape 0x14, 0x0f, 0x02		# DW_CFA_val_offset r15, 2
	.skip	70000, 0x90		# advance_loc4
	ret
	.cfi_endproc
	.size	register_rules, .-register_rules

	.globl	expressions
	.type	expressions, @function
expressions:
	.cfi_startproc
	nop
	# glibc's PLT: CFA = rsp + 8 + ((rip & 15) >= 11) << 3
	.cfi_escape 0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22
	nop
	.cfi_escape 0x10, 0x03, 0x02, 0x77, 0x10	# DW_CFA_expression rbx: breg7 16
	.cfi_escape 0x16, 0x06, 0x02, 0x76, 0x08	# DW_CFA_val_expression rbp: breg6 8
	nop
	.cfi_def_cfa %rsp, 8
	nop
	ret
	.cfi_endproc
	.size	expressions, .-expressions

	.globl	signal_frame
	.type	signal_frame, @function
signal_frame:
	.cfi_startproc
	.cfi_signal_frame
	nop
	.cfi_def_cfa_offset 160
	.cfi_offset %rip, -40
	ret
	.cfi_endproc
	.size	signal_frame, .-signal_frame

	.globl	other_return_column
	.type	other_return_column, @function
other_return_column:
	.cfi_startproc
	.cfi_return_column %r11
	nop
	.cfi_offset %r11, -16
	ret
	.cfi_endproc
	.size	other_return_column, .-other_return_column

	.globl	with_personality
	.type	with_personality, @function
with_personality:
	.cfi_startproc
	.cfi_personality 0x9b, personality_ref
	.cfi_lsda 0x1b, lsda
	pushq	%r12
	.cfi_def_cfa_offset 16
	.cfi_offset %r12, -16
	popq	%r12
	.cfi_def_cfa_offset 8
	.cfi_restore %r12
	ret
	.cfi_endproc
	.size	with_personality, .-with_personality

	.section .rodata
lsda:	.byte	0xff, 0xff, 0x01, 0x00
	.data
	.align 8
personality_ref:
	.quad	0
	.section .note.GNU-stack,"",@progbits
