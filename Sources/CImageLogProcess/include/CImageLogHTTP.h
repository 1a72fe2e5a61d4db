#ifndef CIMAGELOG_HTTP_H
#define CIMAGELOG_HTTP_H
/* libcurl's variadic calls, which Swift cannot make through a function pointer: the caller loads
   libcurl.so.4 with dlopen and passes the function it found with dlsym (curl_easy_setopt,
   curl_easy_getinfo). Each returns libcurl's CURLcode. */
int il_curl_setopt_long(void *setopt, void *handle, int option, long value);
int il_curl_setopt_pointer(void *setopt, void *handle, int option, const void *value);
int il_curl_setopt_offset(void *setopt, void *handle, int option, long long value);
int il_curl_getinfo_long(void *getinfo, void *handle, int info, long *value);
#endif
