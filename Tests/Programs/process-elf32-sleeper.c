/* An i386 program without libc for the ELF32 process test: `gcc -m32 -nostdlib -static`.
   Sleeps for ten minutes with int 0x80 system calls, then exits 0. */
struct timespec32 { long seconds; long nanoseconds; };

void _start(void) {
  struct timespec32 duration = { 600, 0 };
  long result;
  do {
    __asm__ volatile("int $0x80" : "=a"(result) : "a"(162), "b"(&duration), "c"(&duration) : "memory");  /* nanosleep */
  } while (result != 0);
  __asm__ volatile("int $0x80" : : "a"(1), "b"(0));  /* exit(0) */
  for (;;) {}
}
