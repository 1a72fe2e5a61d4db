#ifndef CIMAGELOGIMAGE_H
#define CIMAGELOGIMAGE_H
/* The module's umbrella (module.modulemap beside it; CImageLogCrashHelper.h is left out of the module):
   an image described from its program headers, and its line written. A C file that needs one half
   includes that header alone. */
#include "CImageLogImageDescription.h"
#include "CImageLogImageLine.h"
#endif
