/* symbolicate test program: a function inlined into another at -O2, for inlined-frame lookups. */
static inline __attribute__((always_inline)) int symbolicate_inner(volatile int *pointer) {
  return *pointer * 3 + 1;
}

__attribute__((noinline)) int symbolicate_outer(volatile int *pointer) {
  return symbolicate_inner(pointer) * 2 + symbolicate_inner(pointer + 1);
}

int main(int argc, char **argv) {
  (void)argv;
  return symbolicate_outer(argc > 5 ? (volatile int *)&argc : (volatile int *)0);
}
