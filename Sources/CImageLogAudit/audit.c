/* rtld-audit module: see CImageLogAudit.h. */
#include "CImageLogAudit.h"
