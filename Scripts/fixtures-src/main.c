/* A tiny executable for the Mach-O fixtures; linked without libSystem (we have no Apple SDK),
   so its symbols resolve at load time (-undefined dynamic_lookup). */
extern int macho_fixture_add(int, int);
int main(void) { return macho_fixture_add(1, 2); }
