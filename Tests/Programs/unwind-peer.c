/* Our unwinder next to libgcc's _Unwind_Backtrace over the same stack (UnwinderTests builds it with
   Sources/CImageLogUnwind/*.c, gcc -O2 -fomit-frame-pointer -fasynchronous-unwind-tables).
   Modes:
     plain   a call chain four deep; the deepest function captures its registers (getcontext) and walks
     qsort   the same from inside libc's qsort comparator
     signal  the walk from inside a SIGUSR1 handler, through the signal frame back to main
     altstack  the same with the handler on an alternate signal stack (the walk changes stacks)
     trampoline  a SIGTRAP handler (int3 in level3, so the interrupted frame is not in the vDSO), and
             our unwinder is not shown the vDSO's CFI: the kernel's signal return trampoline there
             (i386's) is recognised by its code and the ucontext read, as libgcc's fallback does
     trampoline-plain  the same with a handler installed without SA_SIGINFO (sigreturn and the old
             sigframe instead of rt_sigreturn and the rt_sigframe)
     stop    for UnwinderTests' outside view: prints the registers getcontext captured in the deepest
             function as "register N 0xVALUE" lines, then "ready", and stops itself (SIGSTOP) there
   Prints "ours 0xPC TRUST EXACT" lines, then "theirs 0xPC" lines (_Unwind_GetIPInfo's ip), then "end". */
#define _GNU_SOURCE
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include "CImageLogUnwind.h"

enum { MAX_IMAGES = 64, MAX_FRAMES = 128 };
static il_unwind_image images[MAX_IMAGES];
static int image_count;
static int hide_vdso_cfi;

static int add_image(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size; (void)context;
  if (image_count == MAX_IMAGES) return 1;
  il_unwind_image image;
  memset(&image, 0, sizeof image);
  image.load_bias = info->dlpi_addr;
  image.text_start = UINT64_MAX;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *header = &info->dlpi_phdr[i];
    uint64_t start = info->dlpi_addr + header->p_vaddr;
    if (header->p_type == PT_LOAD && (header->p_flags & PF_X)) {
      if (start < image.text_start) image.text_start = start;
      if (start + header->p_memsz > image.text_end) image.text_end = start + header->p_memsz;
    }
    if (header->p_type == PT_GNU_EH_FRAME) image.eh_frame_hdr = start;
  }
  /* The vDSO: its program headers are in its first page, at AT_SYSINFO_EHDR. */
  uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
  if (hide_vdso_cfi && vdso != 0 && (uintptr_t)info->dlpi_phdr - vdso < 4096) image.eh_frame_hdr = 0;
  if (image.text_start < image.text_end) images[image_count++] = image;
  return 0;
}

static int find_image(void *context, uint64_t pc, il_unwind_image *image) {
  (void)context;
  for (int i = 0; i < image_count; i++) {
    if (pc >= images[i].text_start && pc < images[i].text_end) { *image = images[i]; return 1; }
  }
  return 0;
}

/* Our own memory, read as another process's would be: an unreadable address is a failed read, never a
   fault. Through a pipe (write fails with EFAULT), as crash_memory.c probes: qemu-user translates a write's
   buffer, not process_vm_readv's remote addresses. */
static int probe[2] = {-1, -1};
static int read_memory(void *context, uint64_t address, void *out, size_t length) {
  (void)context;
  char *to = out;
  while (length > 0) {
    size_t chunk = length < 512 ? length : 512;
    if (write(probe[1], (const void *)(uintptr_t)address, chunk) != (ssize_t)chunk) return 0;
    if (read(probe[0], to, chunk) != (ssize_t)chunk) return 0;
    address += chunk;
    to += chunk;
    length -= chunk;
  }
  return 1;
}

static void registers_from(const ucontext_t *uc, il_register_set *registers) {
  memset(registers, 0, sizeof *registers);
#if defined(__x86_64__)
  static const int dwarf[17] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
                                REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  registers->arch = IL_ARCH_X86_64;
  for (int i = 0; i < 17; i++) {
    registers->value[i] = (uint64_t)uc->uc_mcontext.gregs[dwarf[i]];
    registers->known |= 1ull << i;
  }
#elif defined(__i386__)
  static const int dwarf[9] = {REG_EAX, REG_ECX, REG_EDX, REG_EBX, REG_ESP, REG_EBP, REG_ESI, REG_EDI, REG_EIP};
  registers->arch = IL_ARCH_I386;
  for (int i = 0; i < 9; i++) {
    registers->value[i] = (uint32_t)uc->uc_mcontext.gregs[dwarf[i]];
    registers->known |= 1ull << i;
  }
#elif defined(__aarch64__)
  registers->arch = IL_ARCH_AARCH64;
  for (int i = 0; i <= 30; i++) registers->value[i] = uc->uc_mcontext.regs[i];
  registers->value[IL_AARCH64_SP] = uc->uc_mcontext.sp;
  registers->value[IL_AARCH64_PC] = uc->uc_mcontext.pc;
  registers->known = (1ull << 33) - 1;
#endif
}

static const char *trust_name(il_frame_trust trust) {
  switch (trust) {
  case IL_FRAME_CONTEXT: return "context";
  case IL_FRAME_CFI: return "cfi";
  case IL_FRAME_FRAME_POINTER: return "frame-pointer";
  case IL_FRAME_SCAN: return "scan";
  }
  return "?";
}

static _Unwind_Reason_Code collect(struct _Unwind_Context *context, void *argument) {
  int *count = argument;
  int before = 0;
  uintptr_t ip = _Unwind_GetIPInfo(context, &before);
  if (ip == 0 || ++*count > MAX_FRAMES) return _URC_END_OF_STACK;
  printf("theirs 0x%llx %d\n", (unsigned long long)ip, before);
  return _URC_NO_REASON;
}

static void __attribute__((noinline)) walk(const ucontext_t *uc) {
  il_register_set registers;
  registers_from(uc, &registers);
  il_unwinder unwinder = {.memory = {.read = read_memory}, .find_image = find_image, .scan_bytes = 8192};
  il_unwind_cursor cursor;
  il_unwind_start(&cursor, &registers);
  int count = 0;
  do {
    uint64_t pc = cursor.registers.value[registers.arch == IL_ARCH_AARCH64 ? IL_AARCH64_PC
                                         : registers.arch == IL_ARCH_I386 ? IL_I386_EIP : IL_X86_64_RIP];
    printf("ours 0x%llx %s %d\n", (unsigned long long)pc, trust_name(cursor.trust), cursor.pc_is_exact);
  } while (++count < MAX_FRAMES && il_unwind_step(&unwinder, &cursor));
  count = 0;
  _Unwind_Backtrace(collect, &count);
  printf("end\n");
  fflush(stdout);
}

static const char *mode;
static volatile int sink;

/* Each level does work after its call, so none is a tail call. */
static void __attribute__((noinline)) level4(void) {
  ucontext_t uc;
  getcontext(&uc);
  if (strcmp(mode, "stop") == 0) {
    il_register_set registers;
    registers_from(&uc, &registers);
    for (int i = 0; i < IL_REGISTER_COUNT; i++)
      if (registers.known & (1ull << i)) printf("register %d 0x%llx\n", i, (unsigned long long)registers.value[i]);
    printf("ready\n");
    fflush(stdout);
    raise(SIGSTOP);
  } else {
    walk(&uc);
  }
  sink++;
}

static int compare(const void *a, const void *b) {
  static int once;
  if (!once) {
    once = 1;
    ucontext_t uc;
    getcontext(&uc);
    walk(&uc);
  }
  return *(const int *)a - *(const int *)b;
}

static void handler(int signal, siginfo_t *info, void *context) {
  (void)signal; (void)info; (void)context;
  ucontext_t uc;
  getcontext(&uc);
  walk(&uc);
}

static void plain_handler(int signal) {
  (void)signal;
  ucontext_t uc;
  getcontext(&uc);
  walk(&uc);
}

static void __attribute__((noinline)) level3(void) {
  if (strcmp(mode, "qsort") == 0) {
    int values[64];
    for (int i = 0; i < 64; i++) values[i] = (i * 37) % 64;
    qsort(values, 64, sizeof values[0], compare);
    sink += values[3];
  } else if (strncmp(mode, "trampoline", 10) == 0) {
#if defined(__i386__) || defined(__x86_64__)
    __asm__ volatile("int3" ::: "memory");  /* SIGTRAP with the pc after it: the handler returns here */
#else
    raise(SIGTRAP);
#endif
  } else if (strcmp(mode, "signal") == 0 || strcmp(mode, "altstack") == 0) {
    raise(SIGUSR1);
  } else {
    level4();
  }
  sink++;
}
static void __attribute__((noinline)) level2(void) { level3(); sink++; }
static void __attribute__((noinline)) level1(void) { level2(); sink++; }

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: unwind-peer plain|qsort|signal|altstack|trampoline|trampoline-plain|stop\n");
    return 64;
  }
  mode = argv[1];
  hide_vdso_cfi = strncmp(mode, "trampoline", 10) == 0;
  if (pipe(probe) != 0) return 1;
  dl_iterate_phdr(add_image, NULL);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = handler;
  action.sa_flags = SA_SIGINFO;
  if (strcmp(mode, "altstack") == 0) {
    static char alternate[256 * 1024];
    stack_t stack = {.ss_sp = alternate, .ss_size = sizeof alternate, .ss_flags = 0};
    if (sigaltstack(&stack, NULL) != 0) return 1;
    action.sa_flags |= SA_ONSTACK;
  }
  if (strcmp(mode, "trampoline-plain") == 0) {
    action.sa_flags = 0;
    action.sa_handler = plain_handler;
  }
  sigaction(hide_vdso_cfi ? SIGTRAP : SIGUSR1, &action, NULL);
  level1();
  return sink == 0;
}
