/* What the crashing test programs (crash-program.c, run-crash.c, capture-bench.c) ask of /proc about
   their own threads. Header-only: each program is one cc command. */
#ifndef IMAGELOG_TEST_THREADS_H
#define IMAGELOG_TEST_THREADS_H
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* True when thread `tid` is asleep (state S in its stat): in read(2), pthread_join, ... */
static inline int test_thread_asleep(pid_t tid) {
  char path[64], text[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  char *end = strrchr(text, ')');
  return end != NULL && end[1] == ' ' && end[2] == 'S';
}

/* "tid name" for each thread, from /proc/self/task, into `path`: the oracle for a report's thread list. */
static inline void test_write_thread_list(const char *path) {
  if (path == NULL) return;
  FILE *out = fopen(path, "w");
  DIR *tasks = opendir("/proc/self/task");
  struct dirent *entry;
  while (out != NULL && tasks != NULL && (entry = readdir(tasks)) != NULL) {
    if (entry->d_name[0] == '.') continue;
    char comm_path[300], name[64] = "";
    snprintf(comm_path, sizeof comm_path, "/proc/self/task/%s/comm", entry->d_name);
    FILE *comm = fopen(comm_path, "r");
    if (comm != NULL && fgets(name, sizeof name, comm) != NULL) name[strcspn(name, "\n")] = '\0';
    if (comm != NULL) fclose(comm);
    fprintf(out, "%s %s\n", entry->d_name, name);
  }
  if (tasks != NULL) closedir(tasks);
  if (out != NULL) fclose(out);
}
#endif
