/* Another build at the path a report names (the linux-reports fixtures made without build-ids): none
   of its functions has a name those programs use. With -DPADDING, 64 KiB of code come first, so each
   of their offsets lands elsewhere in this file (with -fsanitize=address the file is as large as
   theirs, and their offsets fall inside it). */
#ifdef PADDING
__asm__(".text\n.globl other_build_padding\n.type other_build_padding, @function\nother_build_padding:\n"
        ".skip 65536, 0x90\n.size other_build_padding, 65536\n");
#endif
__attribute__((noinline)) int other_build_step(int value) { return value * 3 + 1; }
int main(int argc, char **argv) {
  (void)argv;
  return other_build_step(argc) & 1;
}
