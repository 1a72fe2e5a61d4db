#ifndef CIMAGELOG_AUDIT_CRASH_REPORT_H
#define CIMAGELOG_AUDIT_CRASH_REPORT_H
/* The report the audit module writes itself when the helper wrote none (missing, refused, failed,
   killed): imagelog's report layout, as the library's handler writes it (the same pieces:
   crash_writer.h and crash_text.h, libc-free), with what a module without the library's machinery
   knows at a crash: the header, every thread of /proc/self/task by name, the crashed one unwound in
   process by the one unwinder (CImageLogUnwind: call frame information from the images' mapped
   .eh_frame_hdr, then frame pointers, then scanning; memory read with process_vm_readv on itself, which
   cannot fault), the others listed without frames (asking them would need the library's capture
   machinery), the crashed thread's registers, and the Binary Images of the loader's link maps.
   Written into the crash directory under a temporary name and linked to the helper's name for the
   crash. Included by audit.c after audit_crash.h. */
#include "../CImageLog/crash_text.h"
#include "CImageLogUnwind.h"

/* The program's first link map (the executable's), from the first la_objopen: the chain to walk. */
static const struct link_map *crash_first_map;

static int crash_read_memory(void *context, uint64_t address, void *out, size_t length) {
  (void)context;
  struct iovec { void *base; size_t length; } local = {out, length}, remote = {(void *)(uintptr_t)address, length};
  return SYS(SYS_process_vm_readv, current_pid(), &local, 1, &remote, 1, 0) == (long)length;
}

/* The image whose executable segments hold `pc`, with its PT_GNU_EH_FRAME, from the link maps. */
static int crash_find_image(void *context, uint64_t pc, il_unwind_image *image) {
  (void)context;
  int steps = 0;
  for (const struct link_map *map = crash_first_map; map != NULL && steps < 4096; map = map->l_next, steps++) {
    size_t count = 0;
    const ElfW(Phdr) *headers = headers_of(map, map == crash_first_map, &count);
    if (headers == NULL) continue;
    uint64_t bias = (uint64_t)map->l_addr, eh_frame_hdr = 0;
    int holds = 0;
    uint64_t text_start = UINT64_MAX, text_end = 0;
    for (size_t i = 0; i < count; i++) {
      const ElfW(Phdr) *header = &headers[i];
      if (header->p_type == PT_GNU_EH_FRAME) eh_frame_hdr = bias + header->p_vaddr;
      if (header->p_type != PT_LOAD || !(header->p_flags & PF_X)) continue;
      uint64_t start = bias + header->p_vaddr, end = start + header->p_memsz;
      if (pc >= start && pc < end) holds = 1;
      if (start < text_start) text_start = start;
      if (end > text_end) text_end = end;
    }
    if (!holds) continue;
    memset(image, 0, sizeof *image);
    image->text_start = text_start;
    image->text_end = text_end;
    image->load_bias = bias;
    image->eh_frame_hdr = eh_frame_hdr;
    return 1;
  }
  return 0;
}

/* The image of `address` as a frame line names it: its load address and name. */
static const char *crash_frame_image(uint64_t address, uint64_t *load_address, size_t *name_length) {
  int steps = 0;
  for (const struct link_map *map = crash_first_map; map != NULL && steps < 4096; map = map->l_next, steps++) {
    il_image image;
    if (!describe_map(map, map == crash_first_map, &image) || address < image.load_address || address >= image.text_end)
      continue;
    size_t length = strlen(image.path);
    const char *name = il_image_name(image.path, length);
    *load_address = image.load_address;
    *name_length = length - (size_t)(name - image.path);
    return name;
  }
  return NULL;
}

/* A frame in no mapped image but in one removed before the crash: named, with when it went. 1 when it
   was written so. */
static int crash_write_unloaded_frame(il_writer *w, int index, uint64_t address, int trust) {
  static il_unloaded_entry gone;
  if (!il_unloaded_lookup(&audit_unloaded, address, &gone)) return 0;
  char note[128];
  il_line line = {note, sizeof note, 0, 0};
  il_unloaded_when(&line, &gone, audit_record.time_ns);
  char name[IL_UNLOADED_PATH * 4];
  il_line named = {name, sizeof name, 0, 0};
  w_frame_line_noted(w, index, address, name, il_unloaded_name(&named, &gone), gone.base, trust, note, line.used);
  return 1;
}

static void crash_write_frames(il_writer *w, const void *context) {
  il_register_set registers;
  memset(&registers, 0, sizeof registers);
  if (context == NULL) return;
  for (int i = 0; i < IL_HELPER_REGISTERS; i++) registers.value[i] = audit_record.registers[i];
  registers.known = audit_record.known;
  registers.arch = audit_record.arch == 2 ? IL_ARCH_AARCH64 : IL_ARCH_X86_64;
  int pc = registers.arch == IL_ARCH_AARCH64 ? IL_AARCH64_PC : IL_X86_64_RIP;
  il_unwinder unwinder = {{crash_read_memory, NULL}, crash_find_image, NULL, 8192};
  il_unwind_cursor cursor;
  il_unwind_start(&cursor, &registers);
  for (int index = 0; index < 128; index++) {
    uint64_t address = cursor.registers.value[pc], base = address;
    size_t name_length = 0;
    const char *name = crash_frame_image(address, &base, &name_length);
    if (name != NULL) {
      /* Where an image removed before the crash had been: both said. */
      static il_unloaded_entry gone;
      static char note[IL_UNLOADED_PATH * 4 + 128];
      il_line line = {note, sizeof note, 0, 0};
      int was_here = il_unloaded_lookup(&audit_unloaded, address, &gone) &&
                     il_unloaded_was_here(&line, &gone, name, name_length, base, audit_record.time_ns);
      w_frame_line_noted(w, index, address, name, name_length, base, (int)cursor.trust, was_here ? note : NULL, line.used);
    } else if (!crash_write_unloaded_frame(w, index, address, (int)cursor.trust)) {
      w_frame_line(w, index, address, NULL, 0, address, (int)cursor.trust);
    }
    if (!il_unwind_step(&unwinder, &cursor)) break;
  }
}

/* "DIRECTORY/" then `prefix`, the crash's stem (the helper's name for it) and `suffix`. */
static void crash_file_path(char *path, const char *name, const char *prefix, const char *suffix) {
  size_t used = strlen(audit_plan.directory);
  memcpy(path, audit_plan.directory, used);
  if (used == 0 || path[used - 1] != '/') path[used++] = '/';
  memcpy(path + used, prefix, strlen(prefix));
  used += strlen(prefix);
  used += il_helper_file_stem(path + used, name, audit_record.pid, audit_record.time);
  memcpy(path + used, suffix, strlen(suffix) + 1);
}

/* "LABEL" padded to column 18, then `value` (if any): a header line's start. */
static void crash_field(il_writer *w, const char *label, const char *value) {
  size_t length = strlen(label);
  w_str(w, label);
  w_spaces(w, length < 17 ? 17 - length : 1);
  if (value != NULL) w_str(w, value);
}

static void audit_write_crash_report(int signal, siginfo_t *info, void *context) {
  static char path[4096], temporary[IL_HELPER_PATH_MAX + 160], final[IL_HELPER_PATH_MAX + 160];
  long length = SYS(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", path, sizeof path - 1);
  path[length > 0 ? length : 0] = '\0';
  const char *name = il_image_name(path, strlen(path));
  crash_file_path(temporary, name, ".", ".crash.partial");
  crash_file_path(final, name, "", ".crash");
  int unnamed = il_helper_kept(&audit_kept_report), tasks = il_helper_kept(&audit_kept_tasks);
  long fd = unnamed >= 0 ? unnamed : SYS(SYS_openat, AT_FDCWD, temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
  if (fd < 0) {
    il_helper_say_unwritten(audit_plan.directory, -fd);
    return;
  }
  il_writer w = {.fd = (int)fd};
  int code = info != NULL ? info->si_code : 0;
  crash_field(&w, "Process:", name);
  w_str(&w, " [");
  w_udec(&w, (uint64_t)audit_record.pid, 0);
  w_str(&w, "]\n");
  crash_field(&w, "Path:", path);
  w_str(&w, "\n");
  crash_field(&w, "Date/Time:", NULL);
  w_date(&w, audit_record.time);
  static struct { char sysname[65], nodename[65], release[65], version[65], machine[65], domain[65]; } names;
  w_str(&w, "\n");
  crash_field(&w, "OS Version:", "Linux ");
  if (SYS(SYS_uname, &names) == 0) {
    w_str(&w, names.release);
    w_str(&w, " ");
    w_str(&w, names.machine);
  }
  w_str(&w, "\n");
  crash_field(&w, "Exception Type:", NULL);
  const char *signal_text = signal_name(signal), *code_text = code_name(signal, code);
  if (signal_text != NULL) w_str(&w, signal_text);
  else { w_str(&w, "signal "); w_sdec(&w, signal); }
  w_str(&w, " (");
  if (code_text != NULL) w_str(&w, code_text);
  else w_sdec(&w, code);
  w_str(&w, ")\n");
  crash_field(&w, "Exception Codes:", "signal ");
  w_sdec(&w, signal);
  w_str(&w, ", code ");
  w_sdec(&w, code);
  w_str(&w, ", address ");
  w_hex(&w, audit_record.address, 16);
  /* The threads, in /proc/self/task order: read twice (count, then write), without allocating. */
  int crashed = 0, total = 0;
  for (int pass = 0; pass < 2; pass++) {
    long directory = tasks >= 0 ? tasks : SYS(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directory < 0) break;
    if (tasks >= 0) SYS(SYS_lseek, directory, 0, 0 /* SEEK_SET */);
    _Alignas(8) char entries[2048];
    int index = 0;
    if (pass == 1) {
      w_str(&w, "\n");
      crash_field(&w, "Crashed Thread:", NULL);
      w_udec(&w, (uint64_t)crashed, 0);
      w_str(&w, "  tid ");
      w_udec(&w, (uint64_t)audit_record.tid, 0);
      w_str(&w, "\n");
      crash_field(&w, "Threads:", NULL);
      w_udec(&w, (uint64_t)total, 0);
      w_str(&w, "\n");
    }
    for (long got; (got = SYS(SYS_getdents64, directory, entries, sizeof entries)) > 0;) {
      for (long at = 0; at < got;) {
        const struct { uint64_t inode; int64_t offset; unsigned short length; unsigned char type; char name[]; } *entry =
          (const void *)(entries + at);
        at += entry->length;
        if (entry->name[0] < '0' || entry->name[0] > '9') continue;
        pid_t tid = 0;
        for (const char *c = entry->name; *c >= '0' && *c <= '9'; c++) tid = tid * 10 + (*c - '0');
        if (pass == 0) {
          if (tid == audit_record.tid) crashed = total;
          total++;
          continue;
        }
        w_str(&w, "\n");
        w_thread_name(&w, index, tid);
        w_str(&w, "Thread ");
        w_udec(&w, (uint64_t)index, 0);
        w_str(&w, tid == audit_record.tid ? " Crashed:  tid " : ":  tid ");
        w_udec(&w, (uint64_t)tid, 0);
        w_str(&w, "\n");
        if (tid == audit_record.tid) crash_write_frames(&w, context);
        else w_str(&w, "(not unwound: the capture helper wrote no report, and the module asks no other thread)\n");
        index++;
      }
    }
    if (tasks < 0) SYS(SYS_close, directory);
  }
  w_registers(&w, crashed, context, audit_record.address);
  w_str(&w, "\nBinary Images:\n");
  int steps = 0;
  for (const struct link_map *map = crash_first_map; map != NULL && steps < 4096; map = map->l_next, steps++) {
    il_image image;
    if (!describe_map(map, map == crash_first_map, &image)) continue;
    il_line_options crash_style = {0};
    crash_style.style = IL_STYLE_CRASH;
    crash_style.without_event = 1;
    il_line line = {line_text, sizeof line_text - 1, 0, 0};
    il_image_line(&line, &image, &crash_style);
    if (line.truncated) line.used = line.capacity - 1;
    w_bytes(&w, line.text, line.used);
    w_str(&w, "\n");
  }
  static il_unloaded_entry gone;
  for (uint32_t age = 0, any = 0; age < IL_UNLOADED_MAX; age++) {
    if (!il_unloaded_get(&audit_unloaded, age, &gone)) continue;
    if (!any) w_str(&w, "\nUnloaded Images:\n");
    any = 1;
    il_line line = {line_text, sizeof line_text - 1, 0, 0};
    il_unloaded_line(&line, &gone, audit_record.time_ns, il_native_architecture());
    if (line.truncated) line.used = line.capacity - 1;
    w_bytes(&w, line.text, line.used);
    w_str(&w, "\n");
  }
  static il_image_event event;
  for (uint32_t age = IL_EVENTS_MAX, any = 0; age-- > 0;) {
    if (!il_unloaded_get_event(&audit_unloaded, age, &event)) continue;
    if (!any) w_str(&w, "\nImage Timeline:\n");
    any = 1;
    il_line line = {line_text, sizeof line_text - 1, 0, 0};
    il_unloaded_event_line(&line, &event, audit_record.time_ns);
    if (line.truncated) line.used = line.capacity - 1;
    w_bytes(&w, line.text, line.used);
    w_str(&w, "\n");
  }
  w_flush(&w);
  if (unnamed >= 0) {
    /* Never in place of a report the helper wrote under the same name. */
    long linked = il_helper_link_unnamed(unnamed, final);
    if (linked == -EEXIST) {
      crash_file_path(final, name, "", "-in-process.crash");
      linked = il_helper_link_unnamed(unnamed, final);
    }
    if (linked != 0) il_helper_say_unwritten(audit_plan.directory, -linked);
    return;
  }
  SYS(SYS_close, fd);
  /* link then unlink: never replaces a report the helper wrote under the same name. */
  if (SYS(SYS_linkat, AT_FDCWD, temporary, AT_FDCWD, final, 0) == 0) SYS(SYS_unlinkat, AT_FDCWD, temporary, 0);
  else {
    crash_file_path(final, name, "", "-in-process.crash");
    SYS(SYS_renameat, AT_FDCWD, temporary, AT_FDCWD, final);
  }
}
#endif
