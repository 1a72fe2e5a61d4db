/* CImageLogImage is header-only (include/: CImageLogImageDescription.h and CImageLogImageLine.h, under the
   umbrella CImageLogImage.h); SwiftPM wants one source file per C target. */
#include "CImageLogImage.h"
