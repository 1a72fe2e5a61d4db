/* A program whose library is replaced on disk by another build while it runs, as a package upgrade
   replaces it (rename over the path), or deleted:
     replaced-library LIBRARY NEW|- wait|crash
   opens LIBRARY (replaced-lib.c), renames NEW over it (with "-": unlinks it), then calls its
   replaced_outer: "wait" prints "ready" and waits in pause() inside the library; "crash" writes
   through NULL inside it. /proc/PID/maps then says "LIBRARY (deleted)": the loaded file is only in
   the mapping. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: replaced-library LIBRARY NEW|- wait|crash\n");
    return 64;
  }
  void *handle = dlopen(argv[1], RTLD_NOW);
  int (*outer)(int) = handle != NULL ? (int (*)(int))dlsym(handle, "replaced_outer") : NULL;
  if (outer == NULL) {
    fprintf(stderr, "replaced-library: %s\n", dlerror());
    return 2;
  }
  if (strcmp(argv[2], "-") == 0 ? unlink(argv[1]) != 0 : rename(argv[2], argv[1]) != 0) {
    perror("replaced-library: replacing the library");
    return 3;
  }
  return outer(strcmp(argv[3], "crash") == 0);
}
