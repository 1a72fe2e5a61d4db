// A use-after-free read in a loop (gcc -O1: the loop's call site has a DWARF discriminator), of memory
// allocated through JIT-like code (jit.c): the allocation's stack has a frame in no module.
extern "C" void *jit_call(void *(*target)(void), int describe);
__attribute__((noinline)) static void *make() { return new int[4]; }
__attribute__((noinline)) int get(const int *p, int i) { return p[i]; }
int main(int argc, char **) {
  int *p = static_cast<int *>(jit_call(make, 0));
  delete[] p;
  int sum = 0;
  for (int i = 0; i < 2 + argc; i++) sum += get(p, i);
  return sum;
}
