/* Compiled with -g: the DWARF the dSYM-like fixture carries. */
struct fixture_point { int x, y; };
int fixture_distance(struct fixture_point p) { return p.x * p.x + p.y * p.y; }
int main(void) { struct fixture_point p = { 3, 4 }; return fixture_distance(p); }
