#ifndef CIMAGELOGRING_H
#define CIMAGELOGRING_H
/* The record ring `imagelog run` shares with the audit module (libImageLogAudit.so): a memfd the
   module maps, so the program's own process hands over each record with a copy instead of a system
   call, and the records survive the program (a crash, _exit) for the reader to take. Layout and
   protocol: CImageLogAudit.h. One writer (the process that claims the ring), one reader. */
#include <stddef.h>
#include <stdint.h>

typedef struct il_ring il_ring;

/* Creates a ring of `capacity` data bytes (a power of two) and maps it; its descriptor (inherited
   by children, not close-on-exec) goes to *fd. NULL when memfd_create or mmap fails. */
il_ring *il_ring_create(size_t capacity, int *fd);
/* Unmaps the ring. */
void il_ring_destroy(il_ring *ring);
/* Copies up to `length` bytes of records into `buffer` and frees their room, waking a writer that
   waits for room; returns the number of bytes copied (0: none waiting). */
size_t il_ring_read(il_ring *ring, void *buffer, size_t length);
/* Announces that the reader is about to sleep, so that the writer sends a byte on the socket at its
   next flush; returns 1 (and announces nothing) when records arrived in the meantime. */
int il_ring_prepare_to_sleep(il_ring *ring);
/* Withdraws the announcement (the reader woke for another reason). */
void il_ring_awake(il_ring *ring);
/* poll(2) for input on `first` and `second` (either may be -1: not watched) for up to
   `timeout_ms` (-1: no limit). Returns 0 on timeout, -1 on error (errno set), else bit 1 when
   `first` is readable or closed, bit 2 when `second` is. A C helper so that the reader's loop
   needs no array of pollfd (each generic type costs the Swift runtime a lookup at first use). */
int il_wait_readable(int first, int second, int timeout_ms);

/* The rest of `imagelog run`'s start, in C for the same reason (no arrays of C string pointers
   built in Swift). */

/* A connected AF_UNIX stream pair for the records: *read_end (close-on-exec, its write side shut)
   and *write_end (inherited by the program). 0, or -1 with errno. */
int il_record_socket(int *read_end, int *write_end);
/* posix_spawn of `path` with `argument_count` arguments given one after another, each ending in a
   NUL, in `arguments`; the environment is ours without LD_AUDIT and IMAGELOG_AUDIT_* entries, plus
   `added_count` NUL-terminated entries in `added`. The child starts with no signal blocked and
   every signal at its default. Returns posix_spawn's result (0, or an errno value); *child gets
   the PID. */
int il_spawn_audited(int *child, const char *path, const unsigned char *arguments, size_t argument_count,
                     const unsigned char *added, size_t added_count);
#endif
