/* Source of the ELF fixtures' dependency library (Scripts/make-elf-fixtures). */
int fixture_dep(int x) { return x * 3; }
