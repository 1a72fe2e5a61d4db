/* A plugin that is opened, closed, then called: crash-program.c's and run-crash.c's "unloaded" modes
   keep a pointer to plugin_work across dlclose and call it, so the crashing pc is in no mapped image
   but in this one, removed moments before. Their "unloaded-thread" modes have it start a thread
   (plugin_start_thread) that says it runs, then waits in read(2) inside plugin_thread; the plugin
   is closed, then the read is answered: the thread returns into unmapped memory. Built at test time with
     cc -shared -fPIC -Wl,--build-id=sha1 unloaded-plugin.c -o libplugin.so */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

__attribute__((noinline)) int plugin_work(int value) { return value * 3 + 1; }

struct plugin_thread_fds { int reading, ready; };

/* Says it runs (a byte on `ready`), then waits for a byte on `reading` and goes on in this plugin's code. */
__attribute__((noinline)) void *plugin_thread(void *context) {
  struct plugin_thread_fds *fds = context;
  char byte = 'r';
  if (write(fds->ready, &byte, 1) != 1) return NULL;
  while (read(fds->reading, &byte, 1) < 0) {}
  return NULL;
}

/* Starts plugin_thread reading `reading` (once it runs, it writes a byte to `ready`), and does not stop it. */
int plugin_start_thread(int reading, int ready) {
  static struct plugin_thread_fds fds;
  fds.reading = reading;
  fds.ready = ready;
  pthread_t thread;
  return pthread_create(&thread, NULL, plugin_thread, &fds);
}
