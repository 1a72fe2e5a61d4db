/* A signed overflow: UBSan (print_stacktrace=1) prints one stack. */
#include <limits.h>
#include <stdio.h>
__attribute__((noinline)) int add(int a, int b) { return a + b; }
__attribute__((noinline)) int twice(int a) { return add(a, a); }
int main(int argc, char **argv) {
  printf("%d\n", twice(INT_MAX - 1 + argc));
  return 0;
}
