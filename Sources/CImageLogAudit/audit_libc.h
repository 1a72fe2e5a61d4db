#ifndef CIMAGELOG_AUDIT_LIBC_H
#define CIMAGELOG_AUDIT_LIBC_H
/* What the audit module has instead of a C library and the Swift runtime. Included by audit.c only:
   it defines functions and the module's view of its environment, once.

   No libc: a module that needs one makes the loader map, relocate and initialize a second libc in
   the audit namespace at every start of every audited program, which costs more than everything the
   module does (BENCHMARKS.md). So the module makes its few system calls itself, reads the
   environment and the auxiliary vector from the arguments the loader passes its initializer, and
   defines the string functions the compiler and CImageLogImage.h call. Nothing it does touches the
   program's errno (it has none of its own either). */
#include "CImageLogCrashHelper.h"

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

/* ---- what the Swift driver's link would bring ---- */

/* SwiftPM links every product with the Swift driver, which adds swiftrt.o and -lswiftCore. Loaded
   by LD_AUDIT, that would bring the Swift runtime, libstdc++ and a second libm into the audit
   namespace of every program, at each start (the cost: BENCHMARKS.md). So: swiftrt.o's two references to the
   runtime are satisfied here (hidden, never called by anything that matters for a C library),
   and an autolink entry (the Swift driver's own mechanism, read by swift-autolink-extract and put
   before -lswiftCore on the link line) makes the linker drop libraries nothing uses. The module
   links with -nostdlib (Package.swift), so it depends on nothing at all. */
__asm__(".section .swift1_autolink_entries,\"e\"\n.asciz \"-Wl,--as-needed\"\n.previous\n");
__attribute__((visibility("hidden"))) void swift_addNewDSOImage(const void *image) { (void)image; }
__attribute__((visibility("hidden"))) int _swift_backtrace_isThunkFunction(const char *name) { (void)name; return 0; }

/* ---- what libc would have given: system calls, string functions ---- */

/* System calls: CImageLogCrashHelper.h's raw il_sys6 (shared with the crash handler's helper step). */
#define SYS IL_SYS

/* The compiler may call these for copies and comparisons, and CImageLogImage.h does; hidden, so nothing outside the
   module binds to them. The loops stay loops (LLVM does not turn a loop in a function named memcpy
   or memset into a call to itself; the barrier keeps any compiler from doing so). */
__attribute__((visibility("hidden"))) void *memcpy(void *restrict to, const void *restrict from, size_t count) {
  unsigned char *out = to;
  const unsigned char *in = from;
  for (size_t index = 0; index < count; index++) { out[index] = in[index]; __asm__("" ::: "memory"); }
  return to;
}
__attribute__((visibility("hidden"))) void *memset(void *to, int value, size_t count) {
  unsigned char *out = to;
  for (size_t index = 0; index < count; index++) { out[index] = (unsigned char)value; __asm__("" ::: "memory"); }
  return to;
}
__attribute__((visibility("hidden"))) int memcmp(const void *left, const void *right, size_t count) {
  const unsigned char *a = left, *b = right;
  for (size_t index = 0; index < count; index++) if (a[index] != b[index]) return a[index] < b[index] ? -1 : 1;
  return 0;
}
/* What clang turns memcmp(...) == 0 into. */
__attribute__((visibility("hidden"))) int bcmp(const void *left, const void *right, size_t count) {
  return memcmp(left, right, count);
}
__attribute__((visibility("hidden"))) size_t strlen(const char *text) {
  size_t length = 0;
  while (text[length] != '\0') { length++; __asm__("" ::: "memory"); }
  return length;
}

/* True when `entry` is `name=...`; *value is then what follows the '='. */
static int variable_named(const char *entry, const char *name, const char **value) {
  size_t index = 0;
  while (name[index] != '\0' && entry[index] == name[index]) index++;
  if (name[index] != '\0' || entry[index] != '=') return 0;
  *value = entry + index + 1;
  return 1;
}

/* ---- the process: its environment and auxiliary vector, from the loader ---- */

static char **environment;
static const ElfW(auxv_t) *auxiliary;

/* The loader passes every initializer argc, argv and the environment, as the kernel laid them out
   (its initializers run before la_version): the auxiliary vector follows the environment's NULL. */
__attribute__((constructor)) static void capture_environment(int argc, char **argv, char **envp) {
  (void)argc; (void)argv;
  environment = envp;
  if (envp == NULL) return;
  char **end = envp;
  while (*end != NULL) end++;
  auxiliary = (const ElfW(auxv_t) *)(end + 1);
}

static const char *variable(const char *name) {
  const char *value;
  for (char **entry = environment; entry != NULL && *entry != NULL; entry++) if (variable_named(*entry, name, &value)) return value;
  return NULL;
}

static uintptr_t auxiliary_value(uintptr_t type) {
  for (const ElfW(auxv_t) *entry = auxiliary; entry != NULL && entry->a_type != AT_NULL; entry++) {
    if (entry->a_type == type) return entry->a_un.a_val;
  }
  return 0;
}

/* ---- numbers and names in the environment ---- */

/* A decimal number filling all of `text` (strtoull without its leniency: no sign, no spaces, no
   overflow). */
static int parse_number(const char *text, uint64_t *value) {
  if (text == NULL || *text == '\0') return 0;
  uint64_t result = 0;
  for (; *text; text++) {
    if (*text < '0' || *text > '9' || result > (UINT64_MAX - 9) / 10) return 0;
    result = result * 10 + (uint64_t)(*text - '0');
  }
  *value = result;
  return 1;
}

/* strcmp(left, right) == 0, where `left` may be an unset variable. */
static int same_text(const char *left, const char *right) {
  return left != NULL && strlen(left) == strlen(right) && memcmp(left, right, strlen(right)) == 0;
}
#endif
