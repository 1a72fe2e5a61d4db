/* Prints its own stack with glibc's backtrace_symbols_fd, as many C programs' crash handlers do. */
#include <execinfo.h>
__attribute__((noinline)) void dump(void) {
  void *frames[32];
  int count = backtrace(frames, 32);
  backtrace_symbols_fd(frames, count, 2);
}
__attribute__((noinline)) void inner(int depth) { if (depth > 0) inner(depth - 1); else dump(); }
__attribute__((noinline)) static void outer(void) { inner(2); }
int main(void) {
  outer();
  return 0;
}
