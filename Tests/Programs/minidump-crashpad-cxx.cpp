// A C++ program that crashes inside libstdc++ with Crashpad's handler ready to dump it: built with
// Tests/Programs/minidump-crashpad.c linked in, its main renamed minidump_crashpad_main, and run as
//   minidump-crashpad-cxx HANDLER DATABASE return [HANDLER-ARGUMENT...]
// That C main installs the signal handler, starts the named threads blocked in system calls, prints
// "ready" and returns. Then std::string::append (a member libstdc++ instantiates itself: <string>
// declares it extern) is called on a null string from a comparator std::sort calls, and faults in the
// library, so a walk goes from libstdc++'s code through its CFI back to the program. Build it -O0 and
// run it against libstdc++'s debug build (LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/debug), whose
// .sym is a large one (the minidump benchmark's case for reading .sym files).
#include <algorithm>
#include <string>
#include <vector>

extern "C" int minidump_crashpad_main(int count, char **arguments);

static std::string *volatile nowhere = nullptr;

__attribute__((noinline)) static bool crashingLess(int a, int b) {
  nowhere->append("crash");  // faults reading the null string, inside libstdc++
  return a < b;
}

int main(int argc, char **argv) {
  if (minidump_crashpad_main(argc, argv) != 0) return 2;
  std::vector<int> values{5, 3, 9, 1, 7};
  std::sort(values.begin(), values.end(), crashingLess);
  return values.front();
}
