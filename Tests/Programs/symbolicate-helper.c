#include "symbolicate-helper.h"
__attribute__((noinline)) int symbolicate_null_deref(int *pointer) { return *pointer + 1; }
