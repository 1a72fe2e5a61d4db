#ifndef CIMAGELOGIMAGE_H
#define CIMAGELOGIMAGE_H
/* One loaded image, described from the program headers its loader mapped it by, and written as one
   line in each of ImageFormatter's styles. Header-only (static inline), so each user compiles its
   own copy and links nothing: the audit module (which must not bring the rest of the shim into
   every audited program), the shim's snapshot walk (objects.c) and the tests that hold the line
   against the Swift ImageFormatter byte for byte. No allocation, no stdio, no locks, no errno:
   usable from the loader's audit hooks and at crash time. */
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The span of a loaded object's PT_LOAD segments. Link-time addresses except `file_end`. */
typedef struct {
  uint64_t first_vaddr;     /* the lowest PT_LOAD p_vaddr rounded down to its p_align (a power of two, else 1) */
  uint64_t text_end_vaddr;  /* the highest p_vaddr + p_memsz of an executable PT_LOAD, at least first_vaddr */
  uint64_t load_end_vaddr;  /* the highest p_vaddr + p_memsz of any PT_LOAD */
  uint64_t file_end;        /* load_bias + the highest p_vaddr + p_filesz (rounded up to page_size) of a
                               PT_LOAD with file bytes, at least load_bias + first_vaddr; modulo 2^64.
                               A PT_LOAD with p_filesz 0 (all zero-fill) maps nothing from the file,
                               so it adds nothing: the end eu-unstrip takes from /proc/PID/maps. */
} il_layout;

/* Fills `layout` from `count` program headers; returns 0 (layout unset) when there is no PT_LOAD,
   or a PT_LOAD's p_vaddr + p_memsz overflows 64 bits. A PT_LOAD whose p_vaddr + p_filesz overflows
   adds nothing to file_end; a rounding that would overflow is left unrounded. */
static inline int il_image_layout(const ElfW(Phdr) *headers, size_t count, uint64_t load_bias,
                                  uint64_t page_size, il_layout *layout) {
  if (headers == NULL) return 0;
  int found = 0;
  uint64_t first = 0, text_end = 0, load_end = 0;
  for (size_t index = 0; index < count; index++) {
    const ElfW(Phdr) *header = &headers[index];
    if (header->p_type != PT_LOAD) continue;
    uint64_t vaddr = header->p_vaddr, end;
    if (__builtin_add_overflow(vaddr, (uint64_t)header->p_memsz, &end)) return 0;
    uint64_t align = header->p_align;
    if (align <= 1 || (align & (align - 1)) != 0) align = 1;
    uint64_t start = vaddr & ~(align - 1);
    if (!found || start < first) first = start;
    found = 1;
    if (end > load_end) load_end = end;
    if ((header->p_flags & PF_X) && end > text_end) text_end = end;
  }
  if (!found) return 0;
  uint64_t mask = page_size - 1;
  uint64_t file_end = load_bias + first;  /* addresses wrap as the loader's do: the bias is modulo 2^64 */
  for (size_t index = 0; index < count; index++) {
    const ElfW(Phdr) *header = &headers[index];
    if (header->p_type != PT_LOAD || header->p_filesz == 0) continue;
    uint64_t end, rounded;
    if (__builtin_add_overflow((uint64_t)header->p_vaddr, (uint64_t)header->p_filesz, &end)) continue;
    if (__builtin_add_overflow(end, mask, &rounded)) rounded = end;
    else rounded &= ~mask;
    if (load_bias + rounded > file_end) file_end = load_bias + rounded;
  }
  layout->first_vaddr = first;
  layout->text_end_vaddr = text_end > first ? text_end : first;
  layout->load_end_vaddr = load_end;
  layout->file_end = file_end;
  return 1;
}

/* A PT_NOTE segment whose bytes are mapped: inside the file-backed part of a PT_LOAD. */
typedef struct {
  uint64_t address;   /* load_bias + p_vaddr, never 0 */
  size_t size;        /* p_filesz, > 0 */
  size_t alignment;   /* 8 when p_align is 8, else 4 (as notes are read) */
} il_note_area;

/* The next mapped PT_NOTE at or after program header `*index`, in header order; advances `*index`
   past it. Returns 0 when there is none left. Skips a PT_NOTE that is empty, whose end overflows,
   larger than INTPTR_MAX, or that no PT_LOAD's file bytes (p_vaddr..p_vaddr + p_filesz, not
   wrapping) contain. */
static inline int il_image_next_note(const ElfW(Phdr) *headers, size_t count, uint64_t load_bias,
                                     size_t *index, il_note_area *note) {
  if (headers == NULL) return 0;
  while (*index < count) {
    const ElfW(Phdr) *candidate = &headers[(*index)++];
    if (candidate->p_type != PT_NOTE || candidate->p_filesz == 0) continue;
    uint64_t start = candidate->p_vaddr, size = candidate->p_filesz, end;
    if (__builtin_add_overflow(start, size, &end) || size > (uint64_t)INTPTR_MAX) continue;
    int mapped = 0;
    for (size_t load = 0; load < count && !mapped; load++) {
      const ElfW(Phdr) *segment = &headers[load];
      uint64_t file_end;
      if (segment->p_type != PT_LOAD) continue;
      if (__builtin_add_overflow((uint64_t)segment->p_vaddr, (uint64_t)segment->p_filesz, &file_end)) continue;
      mapped = segment->p_vaddr <= start && end <= file_end;
    }
    uint64_t address = load_bias + start;
    if (!mapped || (uintptr_t)address == 0) continue;
    note->address = address;
    note->size = (size_t)size;
    note->alignment = candidate->p_align == 8 ? 8 : 4;
    return 1;
  }
  return 0;
}

/* The GNU build-id in a note area of `size` bytes: the same walk as LoaderImageBuilder.buildIDNote
   (12-byte headers; name and descriptor padded to `alignment`; owner "GNU" with or without its NUL;
   every size checked against what is left). Returns 1 and the descriptor's offset and size when the
   area has a non-empty one; 0 when it has none or the walk meets a malformed note. */
static inline int il_image_build_id(const unsigned char *area, size_t size, size_t alignment,
                                    size_t *descriptor_offset, size_t *descriptor_size) {
  size_t offset = 0;
  while (size - offset >= 12) {
    uint32_t name_size, desc_size, type;
    memcpy(&name_size, area + offset, 4);
    memcpy(&desc_size, area + offset + 4, 4);
    memcpy(&type, area + offset + 8, 4);
    size_t name_start = offset + 12;
    if (name_size > size - name_start) return 0;
    int is_gnu = (name_size >= 4 && memcmp(area + name_start, "GNU", 4) == 0)
                 || (name_size == 3 && memcmp(area + name_start, "GNU", 3) == 0);
    size_t desc_start = (name_start + name_size + alignment - 1) & ~(alignment - 1);
    if (desc_start > size) desc_start = size;
    if (desc_size > size - desc_start) return 0;
    if (is_gnu && type == NT_GNU_BUILD_ID && desc_size > 0) {
      *descriptor_offset = desc_start;
      *descriptor_size = desc_size;
      return 1;
    }
    size_t next = (desc_start + desc_size + alignment - 1) & ~(alignment - 1);
    if (next > size) return 0;
    offset = next;
  }
  return 0;
}

/* What a line shows of an image. Strings and bytes are borrowed. */
typedef struct {
  const char *path;              /* NUL-terminated: the executable's real path, the loader's name, "[vdso]" */
  const char *architecture;      /* "x86_64", ... */
  uint64_t load_bias;
  uint64_t load_address;         /* load_bias + first_vaddr */
  uint64_t text_end;             /* exclusive */
  uint64_t load_end;             /* exclusive */
  uint64_t file_mapped_end;      /* exclusive, at least load_address */
  const unsigned char *build_id; /* NULL when none */
  size_t build_id_size;          /* 0 when none */
  uint64_t build_id_address;     /* where the build-id bytes are mapped, 0 when none */
  int is_main;
} il_image;

/* Describes a loaded object from the program headers it was mapped by; its notes are read in place
   (only those il_image_next_note says are mapped). Returns 0 when il_image_layout refuses it. */
static inline int il_image_describe(const ElfW(Phdr) *headers, size_t count, uint64_t load_bias,
                                    uint64_t page_size, il_image *image) {
  il_layout layout;
  if (!il_image_layout(headers, count, load_bias, page_size, &layout)) return 0;
  image->load_bias = load_bias;
  image->load_address = load_bias + layout.first_vaddr;
  image->text_end = load_bias + layout.text_end_vaddr;
  image->load_end = load_bias + layout.load_end_vaddr;
  if (image->text_end < image->load_address || image->load_end < image->load_address) return 0;
  image->file_mapped_end = layout.file_end > image->load_address ? layout.file_end : image->load_address;
  image->build_id = NULL;
  image->build_id_size = 0;
  image->build_id_address = 0;
  size_t index = 0;
  il_note_area note;
  while (il_image_next_note(headers, count, load_bias, &index, &note)) {
    size_t offset = 0, length = 0;
    const unsigned char *area = (const unsigned char *)(uintptr_t)note.address;
    if (il_image_build_id(area, note.size, note.alignment, &offset, &length)) {
      image->build_id = area + offset;
      image->build_id_size = length;
      image->build_id_address = note.address + offset;
      break;
    }
  }
  return 1;
}

/* ---- the line ---- */

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
} il_line_options;

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
static inline void il_line_hex(il_line *line, uint64_t value) {
  int count = 1;
  while (count < 16 && (value >> (4 * count)) != 0) count++;
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
static inline void il_line_address(il_line *line, uint64_t value) { il_line_put(line, "0x", 2); il_line_hex(line, value); }

static inline void il_line_decimal(il_line *line, uint64_t value) {
  char digits[20];
  int count = 0;
  do { digits[19 - count++] = (char)('0' + value % 10); value /= 10; } while (value != 0);
  il_line_put(line, digits + 20 - count, (size_t)count);
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

/* The first 16 build-id bytes, zero-padded (BuildID.uuidBytes). */
static inline void il_uuid_bytes(const il_image *image, unsigned char out[16]) {
  memset(out, 0, 16);
  memcpy(out, image->build_id, image->build_id_size < 16 ? image->build_id_size : 16);
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

/* A JSON string literal as jsonStringLiteral writes it for the String Swift decodes from these bytes:
   each maximal ill-formed UTF-8 subpart becomes U+FFFD; quote, backslash, \n, \r, \t escaped; other
   scalars below 0x20 as \u00hh; everything else as is. */
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
    if (sequence < 0) { il_line_put(line, "\xEF\xBF\xBD", 3); index += (size_t)-sequence; }
    else { il_line_put(line, text + index, (size_t)sequence); index += (size_t)sequence; }
  }
  il_line_char(line, '"');
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
    if (options->pid < 0) { il_line_char(line, '-'); il_line_decimal(line, (uint64_t)0 - (uint64_t)options->pid); }
    else il_line_decimal(line, (uint64_t)options->pid);
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
      if (options->pid < 0) { il_line_char(line, '-'); il_line_decimal(line, (uint64_t)0 - (uint64_t)options->pid); }
      else il_line_decimal(line, (uint64_t)options->pid);
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
  return line->used - start;
}

/* The architecture name ImageFormatter prints for this build's own images. */
static inline const char *il_native_architecture(void) {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "arm64";
#elif defined(__i386__)
  return "i386";
#elif defined(__arm__)
  return "arm";
#elif defined(__riscv) && __riscv_xlen == 64
  return "riscv64";
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
  return "ppc64le";
#elif defined(__s390x__)
  return "s390x";
#else
  return "unknown";
#endif
}
#endif
