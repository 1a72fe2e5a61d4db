#define _GNU_SOURCE
/* Stopping another process's threads for `imagelog pid --threads` (see CImageLog.h).

   Why ptrace from C: ptrace(2) is variadic, which Swift cannot call. Why PTRACE_SEIZE and
   PTRACE_INTERRUPT rather than PTRACE_ATTACH: ATTACH sends SIGSTOP, a real group stop that outlives
   the tracer when it dies at the wrong moment; a seized thread's interrupt-stop is undone by the
   kernel when the tracer exits (__ptrace_unlink wakes it), so the target is never left stopped.

   Why copy and let go instead of unwinding while stopped: the stop then costs a register read and
   one process_vm_readv per thread, whatever the unwinder and the DWARF it reads cost. Unwinding reads
   the stack (copied here, as it was at the stop) and the images' code, headers and .eh_frame, which
   are read-only mappings and do not change when the threads run again. */
#include "CImageLogProcess.h"
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

enum { LISTED, WAITING, STOPPED, RELEASED, DONE };

typedef struct {
  il_thread_capture capture;
  int phase;
} slot;

typedef struct {
  slot *items;
  size_t count, capacity;
} slots;

static uint64_t now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int known_thread(const slots *list, pid_t tid) {
  for (size_t i = 0; i < list->count; i++) if (list->items[i].capture.tid == tid) return 1;
  return 0;
}

/* `PID (comm) S ppid pgrp session tty_nr tpgid flags ...`. The command may hold spaces and
   parentheses: it ends at the line's last ')'. */
int il_read_task_stat(int directory, const char *path, il_task_stat *out) {
  memset(out, 0, sizeof *out);
  char line[1024];
  int descriptor = openat(directory, path, O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return 0;
  /* The fields wanted come well within the first read: the kernel writes the line at once. */
  ssize_t length = read(descriptor, line, sizeof line - 1);
  close(descriptor);
  if (length <= 0) return 0;
  line[length] = 0;
  char *open = memchr(line, '(', (size_t)length), *close_paren = NULL;
  for (char *c = line + length - 1; c > line && !close_paren; c--) if (*c == ')') close_paren = c;
  if (!open || !close_paren || close_paren < open || close_paren + 2 >= line + length) return 0;
  size_t name_length = (size_t)(close_paren - open - 1);
  if (name_length >= sizeof out->name) name_length = sizeof out->name - 1;
  memcpy(out->name, open + 1, name_length);
  out->state = close_paren[2];
  /* Then ppid (1st after the state) and flags (6th: ppid pgrp session tty_nr tpgid flags). */
  char *field = close_paren + 2;
  for (int index = 1; index <= 6 && field; index++) {
    field = strchr(field, ' ');
    if (field) field++;
    if (field && index == 1) out->parent = (int32_t)strtol(field, NULL, 10);
  }
  if (field) out->flags = strtoull(field, NULL, 10);
  return 1;
}

/* Appends the threads of /proc/PID/task not listed yet, each with its stat's fields; returns how
   many, or -1 with errno. */
static long list_new_threads(pid_t pid, slots *list) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *directory = opendir(path);
  if (!directory) return -1;
  long added = 0;
  struct dirent *entry;
  while ((entry = readdir(directory)) != NULL) {
    char *end = NULL;
    long tid = strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != 0 || tid <= 0 || tid > INT32_MAX) continue;  /* ".", ".." */
    if (known_thread(list, (pid_t)tid)) continue;
    if (list->count == list->capacity) {
      size_t capacity = list->capacity ? list->capacity * 2 : 64;
      slot *grown = realloc(list->items, capacity * sizeof *grown);
      if (!grown) { closedir(directory); errno = ENOMEM; return -1; }
      list->items = grown;
      list->capacity = capacity;
    }
    slot *item = &list->items[list->count++];
    memset(item, 0, sizeof *item);
    item->capture.tid = (pid_t)tid;
    item->phase = LISTED;
    char stat_path[32];
    snprintf(stat_path, sizeof stat_path, "%d/stat", (int)tid);
    il_read_task_stat(dirfd(directory), stat_path, &item->capture.stat);
    added++;
  }
  closedir(directory);
  return added;
}

/* Seizes and interrupts one listed thread. */
static void seize(slot *item, uint64_t *first_interrupt) {
  pid_t tid = item->capture.tid;
  if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
    item->capture.error = errno;
    item->capture.status = errno == ESRCH ? IL_THREAD_VANISHED : IL_THREAD_REFUSED;
    item->phase = DONE;
    return;
  }
  if (*first_interrupt == 0) *first_interrupt = now_ns();
  /* ESRCH here means it is exiting: waitpid reports the exit. */
  ptrace(PTRACE_INTERRUPT, tid, 0, 0);
  item->phase = WAITING;
}

/* Looks once (without blocking) whether a waited-for thread stopped or exited; 1 when it changed. */
static int poll_thread(slot *item) {
  int status = 0;
  pid_t got;
  do got = waitpid(item->capture.tid, &status, __WALL | WNOHANG);
  while (got < 0 && errno == EINTR);
  if (got == 0) return 0;
  if (got < 0 || WIFEXITED(status) || WIFSIGNALED(status)) {  /* ECHILD: gone, no longer our tracee */
    item->capture.status = IL_THREAD_VANISHED;
    item->capture.error = got < 0 ? errno : 0;
    item->phase = DONE;
    return 1;
  }
  if (WIFSTOPPED(status)) {
    /* status >> 16 is PTRACE_EVENT_STOP for the interrupt (and a group stop); 0 for a signal on its
       way to the thread, which must be handed back at detach or the thread would never see it. */
    if ((status >> 16) == 0) item->capture.stop_signal = WSTOPSIG(status);
    item->phase = STOPPED;
    return 1;
  }
  return 0;
}

/* Polls the waiting threads until none waits, or none has stopped for `quiet_ns`, or `limit_ns` has
   passed. Yields first (the threads need a processor to reach their stop), then sleeps briefly
   between sweeps. The quiet time restarts at each stop: on a busy machine hundreds of threads take
   their turns to stop, and none of them is late while others still arrive. */
static void wait_for_stops(slots *list, uint64_t quiet_ns, uint64_t limit_ns, int release_at_once) {
  uint64_t start = now_ns();
  uint64_t deadline = start + quiet_ns;
  unsigned idle = 0;
  for (;;) {
    size_t waiting = 0;
    int progressed = 0;
    for (size_t i = 0; i < list->count; i++) {
      slot *item = &list->items[i];
      if (item->phase != WAITING) continue;
      if (poll_thread(item)) {
        progressed = 1;
        if (release_at_once && item->phase == STOPPED) {
          ptrace(PTRACE_DETACH, item->capture.tid, 0, item->capture.stop_signal);
          item->phase = RELEASED;
        }
      } else {
        waiting++;
      }
    }
    uint64_t now = now_ns();
    if (progressed) deadline = now + quiet_ns;
    if (waiting == 0 || now >= deadline || now - start >= limit_ns) return;
    if (progressed) { idle = 0; continue; }
    if (++idle < 8) { sched_yield(); continue; }
    struct timespec pause = { 0, release_at_once ? 1000000 : 20000 };
    nanosleep(&pause, NULL);
  }
}

static uint64_t mapping_end(const uint64_t *mappings, size_t count, uint64_t address, uint64_t *start) {
  size_t low = 0, high = count;
  while (low < high) {
    size_t middle = low + (high - low) / 2;
    if (mappings[2 * middle + 1] <= address) low = middle + 1;
    else high = middle;
  }
  if (low < count && mappings[2 * low] <= address) { *start = mappings[2 * low]; return mappings[2 * low + 1]; }
  return 0;
}

static void set_register(il_thread_registers *registers, int number, uint64_t value) {
  registers->value[number] = value;
  registers->known |= (uint64_t)1 << number;
}

/* Registers (DWARF-numbered) and the stack copy of one stopped thread. */
static void copy_thread(slot *item, const uint64_t *mappings, size_t mapping_count, uint64_t max_stack) {
  il_thread_capture *capture = &item->capture;
  struct user_regs_struct regs;
  struct iovec vector = { &regs, sizeof regs };
  if (ptrace(PTRACE_GETREGSET, capture->tid, (void *)(uintptr_t)NT_PRSTATUS, &vector) != 0) {
    capture->status = IL_THREAD_FAILED;
    capture->error = errno;
    return;
  }
  il_thread_registers *out = &capture->registers;
  uint64_t sp, red_zone;
#if defined(__x86_64__)
  if (vector.iov_len == 17 * 4) {
    /* A 32-bit (compat) tracee: the kernel gives i386's user_regs_struct, 17 32-bit registers: ebx ecx
       edx esi edi ebp eax xds xes xfs xgs orig_eax eip xcs eflags esp xss. */
    uint32_t r[17];
    memcpy(r, &regs, sizeof r);
    out->arch = 3;
    for (int n = 0; n < 17; n++) capture->machine[n] = r[n];
    capture->machine_count = 17;
    const uint64_t values[9] = { r[6], r[1], r[2], r[0], r[15], r[5], r[3], r[4], r[12] };  /* eax .. edi, eip */
    for (int n = 0; n < 9; n++) set_register(out, n, values[n]);
    sp = r[15];
    red_zone = 0;  /* the i386 System V ABI has none */
  } else if (vector.iov_len != sizeof regs) {
    capture->status = IL_THREAD_UNSUPPORTED;
    return;
  } else {
    out->arch = 1;
    memcpy(capture->machine, &regs, sizeof regs);  /* 27 unsigned longs */
    capture->machine_count = (int)(sizeof regs / sizeof(uint64_t));
    const uint64_t values[17] = { regs.rax, regs.rdx, regs.rcx, regs.rbx, regs.rsi, regs.rdi, regs.rbp, regs.rsp,
                                  regs.r8, regs.r9, regs.r10, regs.r11, regs.r12, regs.r13, regs.r14, regs.r15, regs.rip };
    for (int n = 0; n < 17; n++) set_register(out, n, values[n]);
    sp = regs.rsp;
    red_zone = 128;  /* System V x86_64: a leaf may keep data below the stack pointer */
  }
#elif defined(__aarch64__)
  if (vector.iov_len != sizeof regs) {  /* a compat (32-bit arm) tracee's smaller set */
    capture->status = IL_THREAD_UNSUPPORTED;
    return;
  }
  out->arch = 2;
  memcpy(capture->machine, &regs, sizeof regs);  /* regs[31], sp, pc, pstate */
  capture->machine_count = (int)(sizeof regs / sizeof(uint64_t));
  for (int n = 0; n < 31; n++) set_register(out, n, regs.regs[n]);
  set_register(out, 31, regs.sp);
  set_register(out, 32, regs.pc);
  sp = regs.sp;
  red_zone = 0;
#else
#error "il_capture_threads: x86_64 and aarch64 only"
#endif
  capture->status = IL_THREAD_CAPTURED;
  uint64_t low = 0;
  uint64_t end = mapping_end(mappings, mapping_count, sp, &low);
  uint64_t start = sp - red_zone > low && sp >= red_zone ? sp - red_zone : (low ? low : sp);
  uint64_t length = end ? end - start : max_stack / 16;
  if (length > max_stack) length = max_stack;
  if (length == 0 || start == 0) return;
  uint8_t *bytes = malloc((size_t)length);
  if (!bytes) return;  /* unwinding then reads the live stack: worse, not wrong for the frames it finds */
  struct iovec local = { bytes, (size_t)length }, remote = { (void *)(uintptr_t)start, (size_t)length };
  /* One range: the kernel copies up to the first page it cannot read and returns that count. Read
     through the thread itself: a main thread that exited (pthread_exit) no longer reaches the memory. */
  ssize_t got = process_vm_readv(capture->tid, &local, 1, &remote, 1, 0);
  if (got <= 0) { free(bytes); return; }
  capture->stack = bytes;
  capture->stack_size = (size_t)got;
  capture->stack_address = start;
}

/* Hands the slots' captures over to `out` (its thread array malloc'd) and frees the slots; -1 with
   ENOMEM, the captures' stacks freed, when the array cannot be had. */
static int hand_over(slots *list, il_threads_capture *out) {
  il_thread_capture *threads = malloc((list->count ? list->count : 1) * sizeof *threads);
  if (!threads) {
    for (size_t i = 0; i < list->count; i++) free(list->items[i].capture.stack);
    free(list->items);
    errno = ENOMEM;
    return -1;
  }
  for (size_t i = 0; i < list->count; i++) threads[i] = list->items[i].capture;
  free(list->items);
  out->threads = threads;
  out->count = list->count;
  return 0;
}

int il_list_threads(pid_t pid, il_threads_capture *out) {
  memset(out, 0, sizeof *out);
  slots list = { NULL, 0, 0 };
  if (list_new_threads(pid, &list) < 0) {
    int failure = errno;
    free(list.items);
    errno = failure;
    return -1;
  }
  return hand_over(&list, out);
}

int il_capture_threads(pid_t pid, const uint64_t *mappings, size_t mapping_count, uint64_t max_stack_bytes,
                       uint64_t answer_ns, uint64_t release_ns, il_threads_capture *capture) {
  slots list = { malloc((capture->count ? capture->count : 1) * sizeof(slot)), capture->count, capture->count };
  if (!list.items) {
    il_free_threads_capture(capture);
    errno = ENOMEM;
    return -1;
  }
  for (size_t i = 0; i < capture->count; i++) list.items[i] = (slot){ capture->threads[i], LISTED };
  free(capture->threads);
  memset(capture, 0, sizeof *capture);
  /* Signals that end imagelog wait until every thread is let go (SIGKILL cannot: the kernel lets
     seized threads go when their tracer dies). */
  sigset_t blocked, previous;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGHUP);
  sigaddset(&blocked, SIGQUIT);
  pthread_sigmask(SIG_BLOCK, &blocked, &previous);
  /* The pauses between polls are short: without lowering the timer slack the kernel would stretch
     each one by its default slack, several times the pause itself. */
  int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0);

  uint64_t first_interrupt = 0;
  int failure = 0;
  /* Threads made meanwhile by threads not stopped yet appear in a later listing; once every listed
     thread is stopped, a listing that adds none is the whole process. */
  for (int round = 0; round < 64; round++) {
    size_t before = round == 0 ? 0 : list.count;
    if (round > 0) {
      long added = list_new_threads(pid, &list);
      if (added < 0) {
        if (errno == ENOMEM) failure = errno;
        break;  /* the process went away; what was read stays */
      }
      if (added == 0) break;
    }
    for (size_t i = before; i < list.count; i++) seize(&list.items[i], &first_interrupt);
    wait_for_stops(&list, answer_ns, 10 * answer_ns, 0);
  }
  if (failure == 0) {
    for (size_t i = 0; i < list.count; i++)
      if (list.items[i].phase == STOPPED) copy_thread(&list.items[i], mappings, mapping_count, max_stack_bytes);
  }
  uint64_t last_detach = first_interrupt;
  for (size_t i = 0; i < list.count; i++) {
    slot *item = &list.items[i];
    if (item->phase != STOPPED) continue;
    ptrace(PTRACE_DETACH, item->capture.tid, 0, item->capture.stop_signal);
    item->phase = RELEASED;
    last_detach = now_ns();
  }
  capture->stopped_ns = first_interrupt ? last_detach - first_interrupt : 0;
  pthread_sigmask(SIG_SETMASK, &previous, NULL);
  for (size_t i = 0; i < list.count; i++)
    if (list.items[i].phase == WAITING) list.items[i].capture.status = IL_THREAD_NO_ANSWER;
  /* A thread that did not answer is let go the moment it stops. */
  wait_for_stops(&list, release_ns, release_ns, 1);
  prctl(PR_SET_TIMERSLACK, slack > 0 ? slack : 50000, 0, 0, 0);
  for (size_t i = 0; i < list.count; i++) capture->stragglers += list.items[i].phase == WAITING;

  if (failure != 0) {
    for (size_t i = 0; i < list.count; i++) free(list.items[i].capture.stack);
    free(list.items);
    errno = failure;
    return -1;
  }
  return hand_over(&list, capture);
}

void il_free_threads_capture(il_threads_capture *capture) {
  for (size_t i = 0; i < capture->count; i++) free(capture->threads[i].stack);
  free(capture->threads);
  capture->threads = NULL;
  capture->count = 0;
}
