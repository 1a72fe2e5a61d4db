/* An i386 program without libc for the ELF32 process test: `gcc -m32 -nostdlib -static`.
   Writes "ready" (a test waits for it), sleeps for ten minutes with int 0x80 system calls, then exits 0. */
struct timespec32 { long seconds; long nanoseconds; };

void _start(void) {
  struct timespec32 duration = { 600, 0 };
  static const char ready[] = "ready\n";
  long result;
  __asm__ volatile("int $0x80" : "=a"(result) : "a"(4), "b"(1), "c"(ready), "d"(sizeof ready - 1) : "memory");  /* write */
  do {
    __asm__ volatile("int $0x80" : "=a"(result) : "a"(162), "b"(&duration), "c"(&duration) : "memory");  /* nanosleep */
  } while (result != 0);
  __asm__ volatile("int $0x80" : : "a"(1), "b"(0));  /* exit(0) */
  for (;;) {}
}
