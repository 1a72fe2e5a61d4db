/* A program for the process tests: loads and unloads libraries with dlopen/dlclose.
     process-dlopen-loop hold LIB            load LIB, print "pid N" and "loaded", sleep until killed
     process-dlopen-loop end HOW LIB         load LIB, print "loaded", then end at once: HOW is
                                             _exit (status 5, no atexit, no stdio flush), abort
                                             (SIGABRT), or fork (a forked child loads LIB, prints
                                             "child N" and calls _exit(0); the parent waits, exits 0)
     process-dlopen-loop cycle N LIB...      N times: for each LIB dlopen, print "open NAME", dlclose,
                                             print "close NAME"
     process-dlopen-loop step LIB...         for each LIB: wait for SIGUSR1, dlopen, print "open NAME",
                                             wait for SIGUSR1, dlclose, print "close NAME"; then wait
                                             for SIGUSR1 and end (a test moves it on when it has seen
                                             what it waits for, instead of sleeping for it)
   Prints "ready" first and "done" last; exits with status 3 so the exit status is checked too. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && strcmp(argv[1], "hold") == 0) {
    if (!dlopen(argv[2], RTLD_NOW)) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    printf("pid %d\nloaded\n", (int)getpid());
    for (;;) pause();
  }
  if (argc == 4 && strcmp(argv[1], "end") == 0) {
    if (strcmp(argv[2], "fork") == 0) {
      pid_t child = fork();
      if (child < 0) return 1;
      if (child == 0) {
        if (!dlopen(argv[3], RTLD_NOW)) _exit(1);
        printf("child %d\n", (int)getpid());
        fflush(stdout);
        _exit(0);
      }
      int status = 0;
      waitpid(child, &status, 0);
      printf("done\n");
      return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    if (!dlopen(argv[3], RTLD_NOW)) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    printf("loaded\n");
    if (strcmp(argv[2], "_exit") == 0) _exit(5);
    if (strcmp(argv[2], "abort") == 0) {
      struct rlimit none = { 0, 0 };
      setrlimit(RLIMIT_CORE, &none);  /* a crash, without leaving a core file behind */
      abort();
    }
    return 64;
  }
  if (argc >= 3 && strcmp(argv[1], "step") == 0) {
    sigset_t next;
    sigemptyset(&next);
    sigaddset(&next, SIGUSR1);
    sigprocmask(SIG_BLOCK, &next, NULL);  /* before "ready": no SIGUSR1 can find it at its default */
    printf("ready\n");
    int received;
    for (int index = 2; index < argc; index++) {
      sigwait(&next, &received);
      void *handle = dlopen(argv[index], RTLD_NOW | RTLD_LOCAL);
      if (!handle) { fprintf(stderr, "%s\n", dlerror()); return 1; }
      printf("open %s\n", argv[index]);
      sigwait(&next, &received);
      dlclose(handle);
      printf("close %s\n", argv[index]);
    }
    sigwait(&next, &received);
    printf("done\n");
    return 3;
  }
  if (argc < 4 || strcmp(argv[1], "cycle") != 0) {
    fprintf(stderr, "usage: %s hold LIB | end _exit|abort|fork LIB | cycle N LIB... | step LIB...\n", argv[0]);
    return 64;
  }
  long rounds = atol(argv[2]);
  printf("ready\n");
  for (long round = 0; round < rounds; round++) {
    for (int index = 3; index < argc; index++) {
      void *handle = dlopen(argv[index], RTLD_NOW | RTLD_LOCAL);
      if (!handle) { fprintf(stderr, "%s\n", dlerror()); return 1; }
      printf("open %s\n", argv[index]);
      dlclose(handle);
      printf("close %s\n", argv[index]);
    }
  }
  printf("done\n");
  return 3;
}
