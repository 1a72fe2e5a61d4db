/* A library whose constructor calls dlopen itself, while the loader's lock is held: the observers
 * must not be called from inside it, and the nested load must still be reported once, before the
 * outer dlopen returns. The bare name is found through this library's RUNPATH ($ORIGIN). */
#include <dlfcn.h>

void *core_reenter_handle;

__attribute__((constructor)) static void core_reenter_init(void) {
  core_reenter_handle = dlopen("libcore_second.so", RTLD_NOW | RTLD_LOCAL);
}

__attribute__((destructor)) static void core_reenter_fini(void) {
  if (core_reenter_handle) dlclose(core_reenter_handle);
}
