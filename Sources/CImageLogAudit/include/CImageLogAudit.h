#ifndef CIMAGELOGAUDIT_H
#define CIMAGELOGAUDIT_H
/* The rtld-audit module `imagelog run` loads with LD_AUDIT. It exports la_version, la_objopen,
   la_objclose; nothing here is called from Swift. */
#endif
