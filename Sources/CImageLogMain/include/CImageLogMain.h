// The imagelog executable's own C part. Nothing here is called from Swift: argv.c defines the Swift
// runtime's two CommandLine functions for the statically linked executable (see there).
#ifndef CIMAGELOG_MAIN_H
#define CIMAGELOG_MAIN_H
#endif
