/* A debugger in miniature for the `imagelog pid --threads` tests: forks a child that sleeps, seizes
   it with PTRACE_SEIZE (which does not stop it), prints the child's PID and blocks. The child then
   has a tracer, as under gdb or strace, and no second tracer may attach. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <unistd.h>

int main(void) {
  int ready[2];
  if (pipe(ready) != 0) return 1;
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    /* Never outlives the tracer: set before the tracer goes on (the pipe), and checked, since a
       parent that died before prctl sends no signal. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    close(ready[0]);
    close(ready[1]);  /* end of file: set up */
    for (;;) pause();
  }
  close(ready[1]);
  char byte;
  while (read(ready[0], &byte, 1) > 0) {}
  if (ptrace(PTRACE_SEIZE, child, 0, 0) != 0) { perror("PTRACE_SEIZE"); kill(child, SIGKILL); return 1; }
  printf("%d\n", (int)child);
  fflush(stdout);
  for (;;) pause();
}
