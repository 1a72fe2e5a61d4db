/* The reader's side of the record ring (CImageLogRing.h); the writer's is in CImageLogAudit/audit.c. */
#define _GNU_SOURCE
#include "CImageLogRing.h"
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Must match ring_header in CImageLogAudit/audit.c (layout documented in CImageLogAudit.h). */
struct il_ring {
  uint64_t magic;            /* IL_RING_MAGIC once set up */
  uint64_t capacity;         /* data bytes, a power of two; the data starts at offset 4096 */
  uint32_t owner;            /* 0, then the PID of the process that claimed the ring */
  uint32_t reader_sleeping;  /* 1: the writer sends one byte on the socket at its next flush */
  uint32_t writer_waiting;   /* 1: the writer waits (futex on room_sequence) for room */
  uint32_t room_sequence;    /* bumped by the reader each time it frees room for a waiting writer */
  uint8_t pad1[64 - 32];
  uint64_t written;          /* bytes ever written; the writer stores it after the bytes */
  uint8_t pad2[64 - 8];
  uint64_t consumed;         /* bytes ever read */
};
_Static_assert(offsetof(struct il_ring, written) == 64, "ring layout");
_Static_assert(offsetof(struct il_ring, consumed) == 128, "ring layout");

#define IL_RING_MAGIC 0x474e495231314c49ull  /* "IL11RING", little-endian */
#define IL_RING_DATA 4096

il_ring *il_ring_create(size_t capacity, int *fd) {
  if (capacity == 0 || (capacity & (capacity - 1)) != 0 || capacity > (1u << 30)) return NULL;
  int descriptor = (int)syscall(SYS_memfd_create, "imagelog-records", 0);
  if (descriptor < 0) return NULL;
  if (ftruncate(descriptor, (off_t)(IL_RING_DATA + capacity)) != 0) { close(descriptor); return NULL; }
  void *memory = mmap(NULL, IL_RING_DATA + capacity, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0);
  if (memory == MAP_FAILED) { close(descriptor); return NULL; }
  il_ring *ring = memory;
  ring->capacity = capacity;
  __atomic_store_n(&ring->magic, IL_RING_MAGIC, __ATOMIC_SEQ_CST);
  *fd = descriptor;
  return ring;
}

void il_ring_destroy(il_ring *ring) {
  if (ring != NULL) munmap(ring, IL_RING_DATA + ring->capacity);
}

size_t il_ring_read(il_ring *ring, void *buffer, size_t length) {
  uint64_t consumed = ring->consumed;  /* only the reader stores it */
  uint64_t written = __atomic_load_n(&ring->written, __ATOMIC_SEQ_CST);
  uint64_t available = written - consumed;
  if (available > ring->capacity) available = ring->capacity;  /* a broken writer: never read past the data */
  size_t count = available < length ? (size_t)available : length;
  if (count == 0) return 0;
  const unsigned char *data = (const unsigned char *)ring + IL_RING_DATA;
  size_t start = (size_t)(consumed & (ring->capacity - 1));
  size_t first = count < ring->capacity - start ? count : ring->capacity - start;
  memcpy(buffer, data + start, first);
  memcpy((unsigned char *)buffer + first, data, count - first);
  __atomic_store_n(&ring->consumed, consumed + count, __ATOMIC_SEQ_CST);
  if (__atomic_exchange_n(&ring->writer_waiting, 0, __ATOMIC_SEQ_CST) != 0) {
    __atomic_add_fetch(&ring->room_sequence, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &ring->room_sequence, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  }
  return count;
}

int il_ring_prepare_to_sleep(il_ring *ring) {
  __atomic_store_n(&ring->reader_sleeping, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&ring->written, __ATOMIC_SEQ_CST) != ring->consumed) {
    __atomic_store_n(&ring->reader_sleeping, 0, __ATOMIC_SEQ_CST);
    return 1;
  }
  return 0;
}

void il_ring_awake(il_ring *ring) {
  __atomic_store_n(&ring->reader_sleeping, 0, __ATOMIC_SEQ_CST);
}

int il_wait_readable(int first, int second, int timeout_ms) {
  struct pollfd descriptors[2] = { { first, POLLIN, 0 }, { second, POLLIN, 0 } };
  int ready = poll(descriptors, 2, timeout_ms);
  if (ready <= 0) return ready;
  return (descriptors[0].revents != 0 ? 1 : 0) | (descriptors[1].revents != 0 ? 2 : 0);
}

int il_record_socket(int *read_end, int *write_end) {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, ends) != 0) return -1;
  shutdown(ends[0], SHUT_WR);
  fcntl(ends[0], F_SETFD, FD_CLOEXEC);
  *read_end = ends[0];
  *write_end = ends[1];
  return 0;
}

/* Pointers to `count` consecutive NUL-terminated strings at `strings`, into `table`. */
static void split_strings(const char *strings, size_t count, char **table) {
  for (size_t index = 0; index < count; index++) {
    table[index] = (char *)strings;
    strings += strlen(strings) + 1;
  }
}

int il_spawn_audited(int *child, const char *path, const unsigned char *arguments, size_t argument_count,
                     const unsigned char *added, size_t added_count) {
  size_t inherited = 0;
  for (char **entry = environ; *entry != NULL; entry++) inherited++;
  char **argv = calloc(argument_count + 1, sizeof *argv);
  char **envp = calloc(inherited + added_count + 1, sizeof *envp);
  if (argv == NULL || envp == NULL) { free(argv); free(envp); return ENOMEM; }
  split_strings((const char *)arguments, argument_count, argv);
  size_t used = 0;
  for (char **entry = environ; *entry != NULL; entry++) {
    if (strncmp(*entry, "LD_AUDIT=", 9) == 0 || strncmp(*entry, "IMAGELOG_AUDIT_", 15) == 0) continue;
    envp[used++] = *entry;
  }
  split_strings((const char *)added, added_count, envp + used);
  /* No POSIX_SPAWN_SETSIGDEF or SETSIGMASK: the program gets the signal mask and the ignored signals
     imagelog was started with, as it would run without imagelog (`nohup`, a background job's
     ignored SIGINT). Nothing of imagelog's own is ignored yet (il_forward_termination_signals comes
     after the spawn), and the handlers the Swift runtime installed are reset by exec. */
  pid_t pid = 0;
  int result = posix_spawn(&pid, path, NULL, NULL, argv, envp);
  free(argv);
  free(envp);
  *child = (int)pid;
  return result;
}
