/* Test library for the core observer tests: loaded by the test process, it dlopens and dlcloses a
 * second library itself, from C inside a shared library, and calls `after` right after each call
 * returns so the test can see what its observers had received by then. */
#include <dlfcn.h>
#include <stddef.h>

int core_first_value(void) { return 1; }

void *core_first_open(const char *name, void (*after)(void *handle)) {
  void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (after) after(handle);
  return handle;
}

int core_first_close(void *handle, void (*after)(void *handle)) {
  int result = dlclose(handle);
  if (after) after(handle);
  return result;
}
