/// What is wrong with bytes a reader was given. Every case says where; `description` is one line
/// that a person can act on (the CLI prefixes it with `imagelog: PATH: `).
public enum FormatError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The first bytes are not ELF, Mach-O or a universal header.
  case notRecognized(magic: UInt32)
  /// The input is shorter than even a magic number.
  case tooShort(count: Int)
  /// A read of `needed` bytes at `at` with only `available` left.
  case truncated(at: Int, needed: Int, available: Int)
  /// A range that does not lie inside the `limit` bytes it was taken from.
  case outOfRange(start: Int, length: Int, limit: Int)
  /// A range named by file fields that overflows or lies past the end.
  case fieldOutOfRange(String, offset: UInt64, size: UInt64, limit: Int)
  /// A string table entry with no NUL before the end of its table.
  case unterminatedString(at: Int)
  /// A Mach-O load command that breaks the format's rules.
  case loadCommand(Int, String)
  /// A universal (fat) header or slice that breaks the format's rules.
  case fat(String)
  /// An ELF structure that breaks the format's rules.
  case elf(String)
  /// A Mach-O structure (outside a single load command) that breaks the format's rules.
  case machO(String)
  /// A code signature blob that breaks the format's rules.
  case codeSignature(String)
  /// A count or size larger than the reader accepts for this field.
  case limitExceeded(String, value: UInt64, limit: UInt64)
  /// A LEB128 number at `at` with significant bits beyond 64.
  case leb128TooLong(at: Int)
  /// DWARF that breaks the format's rules: the section, the offset in it, what is wrong.
  case dwarf(section: String, offset: Int, String)
  /// A Breakpad symbol file (`.sym`) record that breaks the format's rules: its line (1-based), what is wrong.
  case breakpad(line: Int, String)
  /// A minidump that breaks the format's rules: which stream (and which entry in it), what is wrong.
  case minidump(String)
  /// A symbol cache file that is not one, is for another file or version, or whose contents break its
  /// format (it is rebuilt).
  case symbolCache(String)

  /// One line saying where and what (without the path: the caller adds it).
  public var description: String {
    switch self {
    case .notRecognized(let magic): "not an ELF or Mach-O file (magic 0x\(hexDigits(UInt64(magic), width: 8)))"
    case .tooShort(let count): "too short to be a binary (\(count) bytes)"
    case let .truncated(at, needed, available):
      "truncated: \(needed) bytes needed at offset \(at), \(available) left"
    case let .outOfRange(start, length, limit): "range \(start)+\(length) outside \(limit) bytes"
    case let .fieldOutOfRange(field, offset, size, limit):
      "\(field) 0x\(hexDigits(offset))+0x\(hexDigits(size)) past end (\(limit) bytes)"
    case .unterminatedString(let at): "string at offset \(at) has no terminating NUL"
    case let .loadCommand(index, what): "load command \(index): \(what)"
    case .fat(let what): "universal header: \(what)"
    case .elf(let what): what
    case .machO(let what): what
    case .codeSignature(let what): "code signature: \(what)"
    case let .limitExceeded(field, value, limit): "\(field) \(value) exceeds the limit of \(limit)"
    case .leb128TooLong(let at): "LEB128 number at offset \(at) does not fit in 64 bits"
    case let .dwarf(section, offset, what): "\(section) at offset 0x\(hexDigits(UInt64(max(offset, 0)))): \(what)"
    case let .breakpad(line, what): "line \(line): \(what)"
    case .minidump(let what): what
    case .symbolCache(let what): "symbol cache: \(what)"
    }
  }
}
