/* Source of the ELF fixtures' main library (Scripts/make-elf-fixtures). Freestanding: no libc needed. */
int fixture_dep(int x);
int fixture_value = 42;
int fixture_add(int a, int b) { return fixture_dep(a) + b + fixture_value; }
