/* Prints its stack with glibc's backtrace_symbols_fd from under JIT-like code (jit.c, its unwind
   information registered): built without PIE, the program's frames read `./prog[0x…]` (no symbol
   exported) and the JIT frame a bare `[0x…]`. */
#include <execinfo.h>
#include <stdio.h>
void *jit_call(void *(*target)(void), int describe);
__attribute__((noinline)) void *dump(void) {
  void *frames[32];
  int count = backtrace(frames, 32);
  fputs("Stack trace:\n", stderr);
  backtrace_symbols_fd(frames, count, 2);
  return 0;
}
__attribute__((noinline)) void *through(void) { return jit_call(dump, 1); }
int main(void) {
  through();
  return 0;
}
