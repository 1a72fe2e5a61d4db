/* Second test library: dlopened by core-first.c's core_first_open. */
int core_second_value(void) { return 2; }
