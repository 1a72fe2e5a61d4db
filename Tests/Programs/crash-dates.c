/* The crash handler's hand-made UTC date against glibc's gmtime_r + strftime, for every day from
   1970 to 2200 at a varying time of day. Built at test time with the report's writer included
   (w_date is static inline in a private header). Prints the number of days checked and of
   mismatches; exits 0 when none. */
#include "../../Sources/CImageLog/crash_writer.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int main(void) {
  long checked = 0, mismatches = 0;
  for (int64_t day = 0; day < 230 * 366; day++) {
    int64_t seconds = day * 86400 + (day * 7919) % 86400;
    il_writer w = {.fd = -1};
    w_date(&w, seconds);
    char expected[64];
    time_t t = (time_t)seconds;
    struct tm parts;
    gmtime_r(&t, &parts);
    size_t length = strftime(expected, sizeof expected, "%Y-%m-%d %H:%M:%S +0000", &parts);
    if (length != w.used || memcmp(expected, w.buffer, length) != 0) {
      if (mismatches++ < 5) printf("mismatch at %lld: %.*s vs %s\n", (long long)seconds, (int)w.used, w.buffer, expected);
    }
    checked++;
  }
  printf("checked=%ld mismatches=%ld\n", checked, mismatches);
  return mismatches == 0 ? 0 : 1;
}
