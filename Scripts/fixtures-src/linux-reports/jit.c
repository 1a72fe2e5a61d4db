/* A stand-in for JIT-compiled code: a few instructions copied into an anonymous executable mapping
   (no file holds them, so no report can name a module for them) that call the function they are
   given. With `describe` set, their call frame information is registered with libgcc
   (__register_frame), so unwinders that use it (glibc's backtrace, a sanitizer's slow unwinder) walk
   through the frame; a frame-pointer walk (a sanitizer's fast unwinder) needs none. x86_64 only. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

void __register_frame(void *begin);

/* push %rbp; mov %rsp,%rbp; call *%rdi; pop %rbp; ret */
static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7, 0x5d, 0xc3};

/* .eh_frame for `code`: a CIE (code alignment 1, data alignment -8, return address in r16, CFA =
   rsp+8, ra at CFA-8) and one FDE with absolute pointers, then the 0 that ends the section. */
static unsigned char frame_info[] = {
  /* CIE */ 0x14, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 0x10, 1, 0x00,
            0x0c, 0x07, 0x08, 0x90, 0x01, 0, 0,
  /* FDE */ 0x20, 0, 0, 0, 0x1c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* pc_begin, filled in */
            sizeof code, 0, 0, 0, 0, 0, 0, 0, 0,
            0x41, 0x0e, 0x10, 0x86, 0x02, /* advance 1: CFA = rsp+16, rbp at CFA-16 */
            0x43, 0x0d, 0x06,             /* advance 3: CFA = rbp+16 */
            0, 0, 0,
  /* end */ 0, 0, 0, 0,
};

typedef void *(*jit_target)(void);

/* Calls `target` through the copied code; `describe`: register its unwind information first. */
void *jit_call(jit_target target, int describe) {
  static void *(*stub)(jit_target);
  if (!stub) {
    unsigned char *page = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return 0;
    memcpy(page, code, sizeof code);
    stub = (void *(*)(jit_target))page;
    if (describe) {
      uint64_t begin = (uint64_t)(uintptr_t)page;
      memcpy(frame_info + 24 + 8, &begin, sizeof begin);
      __register_frame(frame_info);
    }
  }
  return stub(target);
}
