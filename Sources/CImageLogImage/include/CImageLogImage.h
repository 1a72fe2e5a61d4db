#ifndef CIMAGELOGIMAGE_H
#define CIMAGELOGIMAGE_H
/* The module's umbrella (SwiftPM takes the header named after the target as the module's only one):
   an image described from its program headers, and its line written. A C file that needs one half
   includes that header alone. */
#include "CImageLogImageDescription.h"
#include "CImageLogImageLine.h"
#endif
