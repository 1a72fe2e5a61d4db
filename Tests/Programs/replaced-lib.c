/* The library replaced-library.c loads, then replaces on disk (or deletes) while it runs. Built twice
   at test time, as a package upgrade would ship two builds:
     cc -g -shared -fPIC -Wl,--build-id=sha1 replaced-lib.c -o libreplaced.so
     cc -g -shared -fPIC -Wl,--build-id=sha1 -DOTHER_BUILD replaced-lib.c -o libreplaced-new.so
   The other build has 4 KiB of code first and a function of its own, so its build-id differs and each
   of the first build's offsets lands elsewhere in it: names read from it would be wrong. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#ifdef OTHER_BUILD
__asm__(".text\n.globl replaced_padding\n.type replaced_padding, @function\nreplaced_padding:\n"
        ".skip 4096, 0x90\n.size replaced_padding, 4096\n");
__attribute__((noinline)) int replaced_new_feature(int value) { return value * 7; }
#endif

/* Waits in pause() (ready printed), or crashes here writing through NULL. */
__attribute__((noinline)) int replaced_inner(int crash) {
  if (crash) {
    *(volatile int *)0 = 1;
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}

__attribute__((noinline)) int replaced_outer(int crash) { return replaced_inner(crash) + 1; }
