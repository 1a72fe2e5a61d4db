/* A tiny dylib for the Mach-O fixtures: two exported functions, no data segment needed. */
int macho_fixture_add(int a, int b) { return a + b; }
int macho_fixture_twice(int a) { return macho_fixture_add(a, a); }
