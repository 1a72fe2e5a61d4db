/* The program behind the debug-section fixtures (Scripts/make-hostile-fixtures): functions that call
   each other, so each has code of its own for an address to land in, and DWARF that names them. */
__attribute__((noinline)) int leaf_function(int x) { return x * 3 + 1; }

__attribute__((noinline)) int middle_function(int x) { return leaf_function(x) + leaf_function(x + 1); }

int main(int argc, char **argv) {
  (void)argv;
  return middle_function(argc);
}
