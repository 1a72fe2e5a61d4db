/* CImageLogImage is header-only (include/CImageLogImage.h); SwiftPM wants one source file per C target. */
#include "CImageLogImage.h"
