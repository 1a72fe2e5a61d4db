/* A plugin that is opened, closed, then called: crash-program.c's and run-crash.c's "unloaded" modes
   keep a pointer to plugin_work across dlclose and call it, so the crashing pc is in no mapped image
   but in this one, removed moments before. Built at test time with
     cc -shared -fPIC -Wl,--build-id=sha1 unloaded-plugin.c -o libplugin.so */
__attribute__((noinline)) int plugin_work(int value) { return value * 3 + 1; }
