/* libcurl's variadic calls for the crash uploader (CImageLogHTTP.h). Nothing here links libcurl:
   the functions arrive as pointers from dlsym. */
#include "CImageLogHTTP.h"

typedef int (*il_curl_setopt_function)(void *handle, int option, ...);
typedef int (*il_curl_getinfo_function)(void *handle, int info, ...);

int il_curl_setopt_long(void *setopt, void *handle, int option, long value) {
  return ((il_curl_setopt_function)setopt)(handle, option, value);
}

int il_curl_setopt_pointer(void *setopt, void *handle, int option, const void *value) {
  return ((il_curl_setopt_function)setopt)(handle, option, value);
}

/* curl_off_t options (CURLOPT_POSTFIELDSIZE_LARGE): a 64-bit value. */
int il_curl_setopt_offset(void *setopt, void *handle, int option, long long value) {
  return ((il_curl_setopt_function)setopt)(handle, option, value);
}

int il_curl_getinfo_long(void *getinfo, void *handle, int info, long *value) {
  return ((il_curl_getinfo_function)getinfo)(handle, info, value);
}
