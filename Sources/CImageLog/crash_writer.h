#ifndef CIMAGELOG_CRASH_WRITER_H
#define CIMAGELOG_CRASH_WRITER_H
/* The crash report's output: a fixed buffer emptied to a descriptor with write(2) (a raw system call:
   the audit module, which has no libc, writes its short report with it too) whenever it fills,
   so a report of any length goes out without allocating. The pieces (numbers, addresses) are
   formatted by CImageLogImageLine.h's, the ones the Binary Images lines and the audit module use;
   only the sink is the report's own, because an il_line keeps what fits and drops the rest, and a
   report must lose nothing. Header-only: the report (crash_report.c), the table's own Binary Images
   writer (crash_table.c) and the date test (Tests/Programs/crash-dates.c) compile it in. */
#include "CImageLogCrashHelper.h"
#include "CImageLogImageLine.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

typedef struct {
  int fd;
  int failed;       /* errno of the first failed write, or 0 */
  size_t used;
  ssize_t total;
  char buffer[2048];
} il_writer;

static inline void w_flush(il_writer *w) {
  size_t done = 0;
  while (done < w->used && !w->failed) {
    long n = IL_SYS(SYS_write, w->fd, w->buffer + done, w->used - done);
    if (n == -EINTR) continue;
    if (n <= 0) {
      w->failed = n < 0 ? (int)-n : EIO;
      break;
    }
    done += (size_t)n;
    w->total += n;
  }
  w->used = 0;
}

static inline void w_bytes(il_writer *w, const char *bytes, size_t length) {
  while (length > 0) {
    if (w->used == sizeof w->buffer) w_flush(w);
    size_t room = sizeof w->buffer - w->used;
    size_t chunk = length < room ? length : room;
    memcpy(w->buffer + w->used, bytes, chunk);
    w->used += chunk;
    bytes += chunk;
    length -= chunk;
  }
}

static inline void w_str(il_writer *w, const char *string) { w_bytes(w, string, strlen(string)); }

static inline void w_spaces(il_writer *w, size_t count) {
  while (count-- > 0) w_bytes(w, " ", 1);
}

/* Decimal, zero-padded to at least `width` digits. */
static inline void w_udec(il_writer *w, uint64_t value, int width) {
  char digits[24];
  il_line piece = {digits, sizeof digits, 0, 0};
  il_line_decimal_padded(&piece, value, width);
  w_bytes(w, digits, piece.used);
}

static inline void w_sdec(il_writer *w, int64_t value) {
  char digits[24];
  il_line piece = {digits, sizeof digits, 0, 0};
  il_line_signed_decimal(&piece, value);
  w_bytes(w, digits, piece.used);
}

/* "0x" then lowercase hex, zero-padded to at least `width` digits. */
static inline void w_hex(il_writer *w, uint64_t value, int width) {
  char digits[18];
  il_line piece = {digits, sizeof digits, 0, 0};
  il_line_address_padded(&piece, value, width);
  w_bytes(w, digits, piece.used);
}

/* Writes "YYYY-MM-DD HH:MM:SS +0000" for `seconds` since the epoch (UTC, il_civil_from_seconds):
   localtime and gmtime may take locks and read files. */
static inline void w_date(il_writer *w, int64_t seconds) {
  il_civil_time time = il_civil_from_seconds(seconds);
  w_udec(w, (uint64_t)time.year, 4);
  w_bytes(w, "-", 1);
  w_udec(w, (uint64_t)time.month, 2);
  w_bytes(w, "-", 1);
  w_udec(w, (uint64_t)time.day, 2);
  w_bytes(w, " ", 1);
  w_udec(w, (uint64_t)time.hour, 2);
  w_bytes(w, ":", 1);
  w_udec(w, (uint64_t)time.minute, 2);
  w_bytes(w, ":", 1);
  w_udec(w, (uint64_t)time.second, 2);
  w_str(w, " +0000");
}
#endif
