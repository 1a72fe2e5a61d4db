/* Holds a function pointer the test sets; libcore_ctorcall.so's constructor calls it, so Swift code
 * runs inside a constructor (the loader's lock held) without the test executable exporting anything. */
void (*core_ctor_hook)(void);

void core_call_hook(void) {
  if (core_ctor_hook) core_ctor_hook();
}
