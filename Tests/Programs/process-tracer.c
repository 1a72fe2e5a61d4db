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
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  /* never outlives the test's tracer */
    for (;;) pause();
  }
  if (ptrace(PTRACE_SEIZE, child, 0, 0) != 0) { perror("PTRACE_SEIZE"); kill(child, SIGKILL); return 1; }
  printf("%d\n", (int)child);
  fflush(stdout);
  for (;;) pause();
}
