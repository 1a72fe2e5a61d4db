/* Compiled with -g: the DWARF that dsymutil-14 gathers into the debug fixture's dSYM. */
struct fixture_point { int x, y; };
int fixture_distance(struct fixture_point p) { return p.x * p.x + p.y * p.y; }
int main(void) { struct fixture_point p = { 3, 4 }; return fixture_distance(p); }
