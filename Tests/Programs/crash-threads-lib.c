/* The shared library crash-program's "library" mode crashes in, three calls deep. Built at test time
   with gcc -O2 -fomit-frame-pointer -shared -fPIC: no frame records, so only call frame information
   finds level1, crash_library_entry and their caller (a frame-pointer walk loses all three). */
__attribute__((noinline)) static int level2(volatile int *pointer, int value) {
  *pointer = value;  /* the crash: pointer is NULL */
  __asm__ volatile("" ::: "memory");
  return value + 1;
}

__attribute__((noinline)) static int level1(volatile int *pointer, int value) {
  int result = level2(pointer, value * 3);
  __asm__ volatile("" ::: "memory");  /* no tail call: level1 stays on the stack */
  return result + 2;
}

__attribute__((noinline)) int crash_library_entry(volatile int *pointer, int value) {
  int result = level1(pointer, value + 5);
  __asm__ volatile("" ::: "memory");
  return result * 7;
}
