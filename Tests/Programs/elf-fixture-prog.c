/* Source of the ELF fixtures' executables (Scripts/make-elf-fixtures). Never run: only read. */
int fixture_add(int a, int b);
int fixture_counter;
void _start(void) { fixture_counter = fixture_add(1, 2); for (;;) {} }
