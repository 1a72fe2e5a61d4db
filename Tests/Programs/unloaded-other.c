/* Another library of the same layout as unloaded-plugin.c, loaded after the plugin is closed so that
   it is mapped where the plugin was: where plugin_work was, it has int3 instructions, so the call
   through the plugin's old pointer traps in this library. Built at test time with
     cc -shared -fPIC -Wl,--build-id=sha1 unloaded-other.c -o libother.so */
__attribute__((naked, used)) void other_traps(void) {
#if defined(__x86_64__)
  __asm__(".fill 256, 1, 0xcc");
#else
  __asm__(".rept 64\n brk #0\n .endr");
#endif
}
