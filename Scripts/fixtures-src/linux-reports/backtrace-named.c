/* Prints its stack with glibc's backtrace_symbols_fd; built with -rdynamic, so glibc names the
   exported functions (`prog(print_trace+0x1f)`), and without a build-id, as reports without one are. */
#include <execinfo.h>
__attribute__((noinline)) void print_trace(void) {
  void *frames[32];
  int count = backtrace(frames, 32);
  backtrace_symbols_fd(frames, count, 2);
}
__attribute__((noinline)) void handle_request(int depth) {
  if (depth > 0) handle_request(depth - 1); else print_trace();
}
__attribute__((noinline)) static void serve(void) { handle_request(1); }
int main(void) {
  serve();
  return 0;
}
