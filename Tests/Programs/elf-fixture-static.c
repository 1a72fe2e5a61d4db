/* Source of the ELF fixtures' static executable (Scripts/make-elf-fixtures). Never run: only read. */
int fixture_counter;
void _start(void) { fixture_counter = 7; for (;;) {} }
