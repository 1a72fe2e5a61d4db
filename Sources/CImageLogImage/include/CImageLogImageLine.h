#ifndef CIMAGELOGIMAGELINE_H
#define CIMAGELOGIMAGELINE_H
/* Line writing: a bounded buffer and the pieces written into it (numbers, bytes, the project's
   escaping, JSON strings), then one image's event line in each of ImageFormatter's styles. Header-only
   (static inline), for the same users as CImageLogImageDescription.h, plus the crash report's writer,
   which formats its numbers with these pieces. The tests hold the line against the Swift
   ImageFormatter and TextEscaping byte for byte. No allocation, no stdio, no locks, no errno: usable
   from the loader's audit hooks and at crash time. */
#include "CImageLogImageDescription.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- the buffer and its pieces ---- */

/* A bounded output buffer: what does not fit is dropped, and `truncated` says so. */
typedef struct {
  char *text;
  size_t capacity, used;
  int truncated;
} il_line;

static inline void il_line_put(il_line *line, const char *text, size_t length) {
  if (length > line->capacity - line->used) { length = line->capacity - line->used; line->truncated = 1; }
  memcpy(line->text + line->used, text, length);
  line->used += length;
}
static inline void il_line_text(il_line *line, const char *text) { il_line_put(line, text, strlen(text)); }
static inline void il_line_char(il_line *line, char c) {
  if (line->used < line->capacity) line->text[line->used++] = c;
  else line->truncated = 1;
}

/* The pieces below write in place when the line has room for all of the piece (every event line
   does, in the audit module), and through il_line_put, which keeps what fits, when it has not. */

/* Lowercase hex, zero-padded to at least `width` digits (at most 16): the event lines take the
   shortest form, the crash report pads its addresses to 16. */
static inline void il_line_hex_padded(il_line *line, uint64_t value, int width) {
  int count = 1;
  while (count < 16 && (value >> (4 * count)) != 0) count++;
  if (count < width) count = width < 16 ? width : 16;
  if ((size_t)count <= line->capacity - line->used) {
    char *at = line->text + line->used;
    for (int index = count - 1; index >= 0; index--) { at[index] = "0123456789abcdef"[value & 15]; value >>= 4; }
    line->used += (size_t)count;
    return;
  }
  char digits[16];
  for (int index = count - 1; index >= 0; index--) { digits[index] = "0123456789abcdef"[value & 15]; value >>= 4; }
  il_line_put(line, digits, (size_t)count);
}
static inline void il_line_hex(il_line *line, uint64_t value) { il_line_hex_padded(line, value, 1); }
static inline void il_line_address_padded(il_line *line, uint64_t value, int width) {
  il_line_put(line, "0x", 2);
  il_line_hex_padded(line, value, width);
}
static inline void il_line_address(il_line *line, uint64_t value) { il_line_address_padded(line, value, 1); }

/* Decimal, zero-padded to at least `width` digits (the crash report's dates). */
static inline void il_line_decimal_padded(il_line *line, uint64_t value, int width) {
  char digits[24];
  int count = 0;
  do { digits[23 - count++] = (char)('0' + value % 10); value /= 10; } while (value != 0);
  while (count < width && count < 24) digits[23 - count++] = '0';
  il_line_put(line, digits + 24 - count, (size_t)count);
}
static inline void il_line_decimal(il_line *line, uint64_t value) { il_line_decimal_padded(line, value, 0); }
static inline void il_line_signed_decimal(il_line *line, int64_t value) {
  if (value < 0) { il_line_char(line, '-'); il_line_decimal(line, (uint64_t)0 - (uint64_t)value); }
  else il_line_decimal(line, (uint64_t)value);
}

/* Bytes as lowercase hex; `dashes` puts the UUID dashes after bytes 4, 6, 8 and 10. */
static inline void il_line_bytes(il_line *line, const unsigned char *bytes, size_t count, int uppercase, int dashes) {
  const char *digits = uppercase ? "0123456789ABCDEF" : "0123456789abcdef";
  size_t dash_count = dashes ? (count > 10 ? 4 : count > 8 ? 3 : count > 6 ? 2 : count > 4 ? 1 : 0) : 0;
  if (dash_count <= line->capacity - line->used && count <= (line->capacity - line->used - dash_count) / 2) {
    char *at = line->text + line->used;
    for (size_t index = 0; index < count; index++) {
      if (dashes && (index == 4 || index == 6 || index == 8 || index == 10)) *at++ = '-';
      *at++ = digits[bytes[index] >> 4];
      *at++ = digits[bytes[index] & 15];
    }
    line->used = (size_t)(at - line->text);
    return;
  }
  for (size_t index = 0; index < count; index++) {
    if (dashes && (index == 4 || index == 6 || index == 8 || index == 10)) il_line_char(line, '-');
    char pair[2] = { digits[bytes[index] >> 4], digits[bytes[index] & 15] };
    il_line_put(line, pair, 2);
  }
}

/* The length of the UTF-8 sequence at `bytes` (1-4) when it is well-formed, with its scalar; else
   minus the length of its maximal ill-formed subpart (Unicode's "U+FFFD substitution of maximal
   subparts", as Swift's String(decoding:as:) replaces them). */
static inline int il_utf8_sequence(const unsigned char *bytes, size_t left, uint32_t *scalar) {
  unsigned char lead = bytes[0];
  if (lead < 0x80) { *scalar = lead; return 1; }
  int length;
  unsigned char low = 0x80, high = 0xBF;
  uint32_t value;
  if (lead >= 0xC2 && lead <= 0xDF) { length = 2; value = lead & 0x1F; }
  else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3; value = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4; value = lead & 0x07;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else return -1;
  for (int index = 1; index < length; index++) {
    if ((size_t)index >= left) return -index;
    unsigned char next = bytes[index];
    if (next < low || next > high) return -index;
    low = 0x80; high = 0xBF;
    value = (value << 6) | (next & 0x3F);
  }
  *scalar = value;
  return length;
}

/* A path (or name) in a text style, escaped the project's one way so a line stays one line and a
   terminal shows it as data: backslash -> \\; newline, CR, tab -> \n \r \t; other bytes 0x00-0x1F
   and 0x7F -> \xHH; each byte not part of well-formed UTF-8 -> \xHH; C1 controls U+0080-U+009F ->
   \u{HH}; everything else as is. Lowercase hex. */
static inline void il_line_escaped(il_line *line, const char *text, size_t length) {
  const unsigned char *bytes = (const unsigned char *)text;
  size_t index = 0;
  while (index < length) {
    size_t run = index;
    while (index < length && bytes[index] >= 0x20 && bytes[index] < 0x7F && bytes[index] != '\\') index++;
    if (index > run) il_line_put(line, text + run, index - run);
    if (index >= length) break;
    unsigned char byte = bytes[index];
    char escape[8];
    if (byte == '\\') { il_line_put(line, "\\\\", 2); index++; continue; }
    if (byte == '\n') { il_line_put(line, "\\n", 2); index++; continue; }
    if (byte == '\r') { il_line_put(line, "\\r", 2); index++; continue; }
    if (byte == '\t') { il_line_put(line, "\\t", 2); index++; continue; }
    if (byte < 0x80) {
      escape[0] = '\\'; escape[1] = 'x'; escape[2] = "0123456789abcdef"[byte >> 4]; escape[3] = "0123456789abcdef"[byte & 15];
      il_line_put(line, escape, 4);
      index++;
      continue;
    }
    uint32_t scalar = 0;
    int sequence = il_utf8_sequence(bytes + index, length - index, &scalar);
    if (sequence < 0) {
      for (int bad = 0; bad < -sequence; bad++) {
        unsigned char b = bytes[index + (size_t)bad];
        escape[0] = '\\'; escape[1] = 'x'; escape[2] = "0123456789abcdef"[b >> 4]; escape[3] = "0123456789abcdef"[b & 15];
        il_line_put(line, escape, 4);
      }
      index += (size_t)-sequence;
    } else if (scalar >= 0xF780 && scalar <= 0xF7FF) {
      /* The scalars Swift's PathBytes uses for bytes that are not UTF-8: their own bytes are kept one
         by one there, and escaped one by one here, so both sides write the same text. */
      for (int part = 0; part < 3; part++) {
        unsigned char b = bytes[index + (size_t)part];
        escape[0] = '\\'; escape[1] = 'x'; escape[2] = "0123456789abcdef"[b >> 4]; escape[3] = "0123456789abcdef"[b & 15];
        il_line_put(line, escape, 4);
      }
      index += 3;
    } else if (scalar >= 0x80 && scalar <= 0x9F) {
      memcpy(escape, "\\u{", 3);
      escape[3] = "0123456789abcdef"[scalar >> 4]; escape[4] = "0123456789abcdef"[scalar & 15]; escape[5] = '}';
      il_line_put(line, escape, 6);
      index += (size_t)sequence;
    } else {
      il_line_put(line, text + index, (size_t)sequence);
      index += (size_t)sequence;
    }
  }
}

/* A JSON string literal as jsonStringLiteral writes it for the String PathBytes decodes from these
   bytes: each byte that is not part of well-formed UTF-8 becomes the text \xHH (JSON "\\xHH"); quote,
   backslash, \n, \r, \t escaped; other scalars below 0x20 as \u00hh; everything else as is. */
static inline void il_line_json_string(il_line *line, const char *text, size_t length) {
  const unsigned char *bytes = (const unsigned char *)text;
  il_line_char(line, '"');
  size_t index = 0;
  while (index < length) {
    size_t run = index;
    while (index < length && bytes[index] >= 0x20 && bytes[index] < 0x80 && bytes[index] != '"' && bytes[index] != '\\') index++;
    if (index > run) il_line_put(line, text + run, index - run);
    if (index >= length) break;
    unsigned char byte = bytes[index];
    if (byte < 0x80) {
      index++;
      switch (byte) {
      case '"': il_line_put(line, "\\\"", 2); break;
      case '\\': il_line_put(line, "\\\\", 2); break;
      case '\n': il_line_put(line, "\\n", 2); break;
      case '\r': il_line_put(line, "\\r", 2); break;
      case '\t': il_line_put(line, "\\t", 2); break;
      default: {
        char escape[6] = { '\\', 'u', '0', '0', "0123456789abcdef"[byte >> 4], "0123456789abcdef"[byte & 15] };
        il_line_put(line, escape, 6);
      }
      }
      continue;
    }
    uint32_t scalar = 0;
    int sequence = il_utf8_sequence(bytes + index, length - index, &scalar);
    /* A byte that is not UTF-8 (and each byte of a scalar U+F780-U+F7FF, which Swift's PathBytes
       keeps byte by byte) is the text \xHH: a JSON string cannot hold the byte itself. */
    int raw = sequence < 0 ? -sequence : (scalar >= 0xF780 && scalar <= 0xF7FF) ? 3 : 0;
    if (raw > 0) {
      for (int part = 0; part < raw; part++) {
        unsigned char b = bytes[index + (size_t)part];
        char escape[5] = { '\\', '\\', 'x', "0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15] };
        il_line_put(line, escape, 5);
      }
      index += (size_t)raw;
    } else { il_line_put(line, text + index, (size_t)sequence); index += (size_t)sequence; }
  }
  il_line_char(line, '"');
}

/* ---- an image's event line ---- */

enum { IL_STYLE_LOGGER = 0, IL_STYLE_CRASH = 1, IL_STYLE_UNSTRIP = 2, IL_STYLE_JSON = 3 };

/* How to write an event line; mirrors ImageFormatter's options and the event, timing and pid fields. */
typedef struct {
  int style;                /* IL_STYLE_* */
  int full_build_ids;       /* crash style: the whole build-id between < > */
  int removed;              /* a Removed event (else Added) */
  int without_event;        /* the crash and unstrip styles' line alone, without "Added: " or "Removed: "
                               (ImageFormatter.format rather than eventLine: the crash report's Binary
                               Images line) */
  int timing;               /* append the time since start and the load step (added events only) */
  uint64_t since_start_ns, step_ns;
  int labelled;             /* "[pid N] " before the line, or a leading "pid" field in JSON */
  int64_t pid;
  int has_loaded_for;       /* a Removed event: append how long the image was loaded (loaded_for_ns) */
  uint64_t loaded_for_ns;
} il_line_options;

/* The first 16 build-id bytes, zero-padded (BuildID.uuidBytes). */
static inline void il_uuid_bytes(const il_image *image, unsigned char out[16]) {
  memset(out, 0, 16);
  memcpy(out, image->build_id, image->build_id_size < 16 ? image->build_id_size : 16);
}

/* Where the path's last component starts (Image.name). */
static inline const char *il_image_name(const char *path, size_t length) {
  const char *slash = NULL;
  for (size_t index = 0; index < length; index++) if (path[index] == '/') slash = path + index;
  return slash ? slash + 1 : path;
}

/* Nanoseconds as milliseconds with three decimals (the CLI's milliseconds()). */
static inline void il_line_milliseconds(il_line *line, uint64_t nanoseconds) {
  uint64_t micro = nanoseconds / 1000;
  il_line_decimal(line, micro / 1000);
  il_line_char(line, '.');
  uint64_t fraction = micro % 1000;
  char digits[3] = { (char)('0' + fraction / 100), (char)('0' + fraction / 10 % 10), (char)('0' + fraction % 10) };
  il_line_put(line, digits, 3);
}

/* Writes the event line for `image` (without a newline): the bytes ImageFormatter's event line
   gives for the same image, options, pid and timing. Returns the length written. */
static inline size_t il_image_line(il_line *line, const il_image *image, const il_line_options *options) {
  const char *path = image->path ? image->path : "";
  size_t path_length = strlen(path);
  const char *name = il_image_name(path, path_length);
  size_t name_length = path_length - (size_t)(name - path);
  uint64_t text_size = image->text_end - image->load_address;
  size_t start = line->used;
  if (options->labelled && options->style != IL_STYLE_JSON) {
    il_line_text(line, "[pid ");
    il_line_signed_decimal(line, options->pid);
    il_line_text(line, "] ");
  }
  if (options->style == IL_STYLE_LOGGER || (options->style != IL_STYLE_JSON && !options->without_event))
    il_line_text(line, options->removed ? "Removed: " : "Added: ");
  switch (options->style) {
  case IL_STYLE_LOGGER: {
    il_line_address(line, image->load_address);
    il_line_text(line, " (");
    il_line_address(line, text_size);
    il_line_text(line, ") ");
    il_line_escaped(line, path, path_length);
    il_line_text(line, " <");
    unsigned char uuid[16];
    il_uuid_bytes(image, uuid);
    il_line_bytes(line, uuid, 16, 1, 1);
    il_line_char(line, '>');
    break;
  }
  case IL_STYLE_CRASH: {
    il_line_address(line, image->load_address);
    il_line_text(line, " - ");
    il_line_address(line, text_size == 0 ? image->load_address : image->text_end - 1);
    il_line_char(line, ' ');
    if (image->is_main) il_line_char(line, '+');
    il_line_escaped(line, name, name_length);
    il_line_char(line, ' ');
    il_line_text(line, image->architecture);
    il_line_text(line, "  <");
    if (image->build_id_size != 0 && options->full_build_ids) {
      il_line_bytes(line, image->build_id, image->build_id_size, 0, 0);
    } else {
      unsigned char uuid[16];
      il_uuid_bytes(image, uuid);
      il_line_bytes(line, uuid, 16, 0, 0);
    }
    il_line_text(line, "> ");
    il_line_escaped(line, path, path_length);
    break;
  }
  case IL_STYLE_UNSTRIP: {
    uint64_t size = image->file_mapped_end - image->load_address;
    il_line_address(line, image->load_address);
    il_line_char(line, '+');
    if (size == 0) il_line_char(line, '0'); else il_line_address(line, size);
    il_line_char(line, ' ');
    if (image->build_id_size != 0) {
      il_line_bytes(line, image->build_id, image->build_id_size, 0, 0);
      if (image->build_id_address != 0) { il_line_char(line, '@'); il_line_address(line, image->build_id_address); }
    } else {
      il_line_char(line, '-');
    }
    il_line_char(line, ' ');
    if (path_length == 0) il_line_char(line, '-'); else il_line_escaped(line, path, path_length);
    il_line_text(line, " - ");
    if (path_length == 0) il_line_escaped(line, name, name_length); else il_line_escaped(line, path, path_length);
    break;
  }
  default: {
    il_line_char(line, '{');
    if (options->labelled) {
      il_line_text(line, "\"pid\":");
      il_line_signed_decimal(line, options->pid);
      il_line_char(line, ',');
    }
    il_line_text(line, options->removed ? "\"event\":\"removed\",\"path\":" : "\"event\":\"added\",\"path\":");
    il_line_json_string(line, path, path_length);
    il_line_text(line, ",\"name\":");
    il_line_json_string(line, name, name_length);
    il_line_text(line, ",\"loadAddress\":\""); il_line_address(line, image->load_address);
    il_line_text(line, "\",\"loadBias\":\""); il_line_address(line, image->load_bias);
    il_line_text(line, "\",\"textStart\":\""); il_line_address(line, image->load_address);
    il_line_text(line, "\",\"textEnd\":\""); il_line_address(line, image->text_end);
    il_line_text(line, "\",\"textSize\":"); il_line_decimal(line, text_size);
    il_line_text(line, ",\"loadEnd\":\""); il_line_address(line, image->load_end);
    il_line_text(line, "\",\"loadSize\":"); il_line_decimal(line, image->load_end - image->load_address);
    il_line_text(line, ",\"fileMappedEnd\":\""); il_line_address(line, image->file_mapped_end);
    il_line_text(line, "\",\"buildID\":");
    if (image->build_id_size == 0) {
      il_line_text(line, "null,\"uuid\":null,\"debugID\":null");
    } else {
      unsigned char uuid[16];
      il_uuid_bytes(image, uuid);
      il_line_char(line, '"'); il_line_bytes(line, image->build_id, image->build_id_size, 0, 0);
      il_line_text(line, "\",\"uuid\":\""); il_line_bytes(line, uuid, 16, 1, 1);
      unsigned char swapped[16] = { uuid[3], uuid[2], uuid[1], uuid[0], uuid[5], uuid[4], uuid[7], uuid[6] };
      memcpy(swapped + 8, uuid + 8, 8);
      il_line_text(line, "\",\"debugID\":\""); il_line_bytes(line, swapped, 16, 1, 1);
      il_line_char(line, '"');
    }
    il_line_text(line, ",\"buildIDAddress\":");
    if (image->build_id_size != 0) { il_line_char(line, '"'); il_line_address(line, image->build_id_address); il_line_char(line, '"'); }
    else il_line_text(line, "null");
    il_line_text(line, ",\"architecture\":");
    il_line_json_string(line, image->architecture, strlen(image->architecture));
    il_line_text(line, image->is_main ? ",\"isMainExecutable\":true" : ",\"isMainExecutable\":false");
    if (options->timing && !options->removed) {
      il_line_text(line, ",\"addedAtNanoseconds\":"); il_line_decimal(line, options->since_start_ns);
      il_line_text(line, ",\"loadNanoseconds\":"); il_line_decimal(line, options->step_ns);
    }
    if (options->has_loaded_for && options->removed) {
      il_line_text(line, ",\"loadedForNanoseconds\":"); il_line_decimal(line, options->loaded_for_ns);
    }
    il_line_char(line, '}');
    return line->used - start;
  }
  }
  if (options->timing && !options->removed) {
    il_line_text(line, "  +");
    il_line_milliseconds(line, options->since_start_ns);
    il_line_text(line, " ms (loaded in ");
    il_line_milliseconds(line, options->step_ns);
    il_line_text(line, " ms)");
  }
  if (options->has_loaded_for && options->removed) {
    il_line_text(line, "  (loaded for ");
    il_line_milliseconds(line, options->loaded_for_ns);
    il_line_text(line, " ms)");
  }
  return line->used - start;
}
#endif
