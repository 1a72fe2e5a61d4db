#ifndef CIMAGELOG_CRASH_H
#define CIMAGELOG_CRASH_H
/* Crash-time support: an image table that can be written from a signal handler, and an opt-in
   crash handler that writes imagelog's crash report (Sources/CImageLog/crash_internal.h says which
   file holds each part and its design). */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- The image table (writers: any thread, never from a signal handler) ---- */

/* Adds (or replaces, keyed by load_address) one image. `text_start..<text_end` is the range frame
   addresses are matched against; `name` is the frame column; `line` is the image's crash-style
   Binary Images line without a newline. The strings are copied. Returns 0, or -1 with errno
   (ENOMEM, EINVAL). Thread-safe; takes a mutex and may allocate: not async-signal-safe. */
int il_crash_table_add(uint64_t load_address, uint64_t text_start, uint64_t text_end,
                       const char *name, const char *line);

/* il_crash_table_add with what the table keeps once the image is removed, for a crash after it
   (Unloaded Images, frames in code no longer mapped): the image's mapped range
   `load_address..<load_end`, its `path` and its whole build-id (NULL and 0 without one). */
int il_crash_table_add_image(uint64_t load_address, uint64_t load_end, uint64_t text_start, uint64_t text_end,
                             const char *name, const char *line, const char *path, const uint8_t *build_id,
                             size_t build_id_size);

/* Removes the image loaded at `load_address`, keeping it among the last removed images (its range,
   path, build-id, when it was added and removed, and the calling thread). Returns 1 if it was in the
   table, else 0. */
int il_crash_table_remove(uint64_t load_address);

/* How many removed images the table keeps for a crash report, at most 64 (crash_unloaded.h's
   IL_UNLOADED_MAX; 16 unless set; 0 keeps none): the memory is static (512 bytes an image), nothing is
   allocated. Forgets those kept so far. Returns 0, or EINVAL above the maximum. */
int il_crash_keep_unloaded(uint32_t count);

/* The number of images in the published table. */
size_t il_crash_table_count(void);

/* Writes the published table, one crash-style line per image each ending in "\n", with write(2)
   only: async-signal-safe, no allocation, no lock; never sees a half-updated table. Returns the
   number of bytes written, or -1 with errno from write(2). */
ssize_t il_crash_write_binary_images(int fd);

/* ---- The crash handler ---- */

/* Opens `path` for the report (O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0644). Returns a descriptor
   or -1 with errno. Mirrors open(2). */
int il_crash_open_report(const char *path);

/* Installs handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT and SIGTRAP that write a report
   of every thread to `fd` (kept open; the caller must not close it), then restore the handlers
   found here and re-raise. Gives the calling thread an alternate signal stack and maps the slots
   other threads answer into (SIGRTMAX - 2 asks them, installed only while a report is written).
   Calling it again only changes the descriptor. `fd` may be -1 when il_crash_set_helper laid out a
   helper (the in-process report then goes into its directory). Returns 0 or an errno value. Not
   async-signal-safe. */
int il_crash_install(int fd);

/* Out-of-process capture: on a crash the handler first starts `helper` (the imagelog executable,
   an absolute path resolved by the caller now, not at the crash) as
   `helper capture-crash --pid PID --record ADDRESS --crash-dir DIRECTORY`, lets it
   trace the process (PR_SET_PTRACER) and waits for it at most `timeout_ms`; the helper stops every
   thread, unwinds them from outside (the crashed one from the registers the handler recorded) and
   writes its symbolicated report into `directory` (absolute). When it writes none (missing, refused,
   failed, crashed, killed at the timeout) the handler writes its own report: to the descriptor given
   to il_crash_install, or, when that is -1, into `directory` under the name the helper would have
   used (into a file opened now, unnamed until the crash, close-on-exec at a high number: a program
   with no descriptor left at its crash still gets its report). NULL `helper` turns capture off. Call before il_crash_install (or again after it to change
   the helper). Returns 0, or EINVAL (a relative or too long path), ENOMEM. Not async-signal-safe. */
int il_crash_set_helper(const char *helper, const char *directory, uint64_t timeout_ms);

/* Gives the calling thread an alternate signal stack (unless it has a large enough one), so a
   stack overflow on this thread is reported too. Returns 0 or an errno value. */
int il_crash_prepare_thread(void);

/* 1 while il_crash_install's handlers are installed, else 0. */
int il_crash_installed(void);

/* For a thread that just started (the pthread_create interposer calls it before the start routine):
   gives it an alternate signal stack unless it has one, freed when the thread exits (a key
   destructor; left mapped if a handler is running on it then). Returns 0 or an errno value. */
int il_crash_prepare_new_thread(void);

/* Puts back the handlers found by il_crash_install. Returns 0, or ESRCH if none was installed. */
int il_crash_uninstall(void);

/* Writes the report il_crash_install's handler would write for (signal, info, ucontext) to `fd`:
   for tests and for a host that runs its own signal handler. After il_crash_install it asks every
   other thread for its stack (waiting a bounded time, longer for threads still runnable then:
   crash_internal.h's IL_ANSWER_BUDGET_MS and IL_ANSWER_LIMIT_MS); before, or while another report
   is asking, it reports the calling thread alone. Async-signal-safe. */
void il_crash_write_report(int fd, int signal, const void *info, const void *ucontext);

#endif
