public import ImageReaders

/// A virtual address in a process (or a link-time address in a file). 64 bits even for ELF32.
public typealias Address = UInt64

/// One binary image mapped into a process: the main executable, a shared library, the dynamic
/// loader or the vDSO. A value: a remove event carries exactly the value its add event carried.
public struct Image: Hashable, Sendable {
  /// The file the image was loaded from: the real path of the main executable (which
  /// `dl_iterate_phdr` reports as ""), the loader's name for libraries, `[vdso]` for the vDSO
  /// (named as `/proc/PID/maps` names it). Its bytes are kept: a byte that is not UTF-8 is one
  /// scalar U+F780–U+F7FF (`PathBytes.string`); open it with `PathBytes.withCString(path)`.
  public var path: String {
    get { names.path }
    set { names = Names(path: newValue, name: names.name, buildID: names.buildID, architecture: names.architecture) }
  }
  /// The last path component of `path` (`[vdso]` for the vDSO).
  public var name: String {
    get { names.name ?? Self.shortName(of: names.path) }
    set { names = Names(path: names.path, name: newValue, buildID: names.buildID, architecture: names.architecture) }
  }
  /// Where the image's ELF header is mapped: `loadBias` plus the first `PT_LOAD`'s page-aligned address.
  public var loadAddress: Address
  /// The difference between run-time and link-time addresses (`dlpi_addr`, `l_addr`).
  /// Wraps modulo 2^64 for images linked above where they are loaded.
  public var loadBias: Address
  /// From `loadAddress` to the end of the last executable `PT_LOAD`: the span Apple's `__TEXT`
  /// covers and Swift's backtracer prints. Half-open.
  public var textRange: Range<Address>
  /// From `loadAddress` to the end of the last `PT_LOAD` of any kind (`p_vaddr + p_memsz`). Half-open.
  public var loadRange: Range<Address>
  /// The GNU build-id from the image's `PT_NOTE` in memory, or `nil` when it has none.
  public var buildID: BuildID? {
    get { names.buildID }
    set { names = Names(path: names.path, name: names.name, buildID: newValue, architecture: names.architecture) }
  }
  /// The architecture name crash tooling uses (`x86_64`, `arm64`, `i386`, ...).
  public var architecture: String {
    get { names.architecture }
    set { names = Names(path: names.path, name: names.name, buildID: names.buildID, architecture: newValue) }
  }
  /// True for the program's own executable.
  public var isMainExecutable: Bool
  /// Where the build-id bytes themselves are mapped (the `@0xADDR` of `eu-unstrip -n`), or `nil`.
  package var buildIDAddress: Address?
  /// From `loadAddress` to the end of the last page backed by the file: `loadBias + p_vaddr + p_filesz`
  /// of the `PT_LOAD` (with file bytes) that ends highest, rounded up to the page size. This is the
  /// module span `eu-unstrip -n -p PID` reports for a live process (elfutils ends a module at its last
  /// file-backed mapping in /proc/PID/maps), which leaves out the zero-filled tail of the data segment.
  package var fileMappedRange: Range<Address>

  /// The image's strings and build-id, shared by its copies: an image is copied several times on its
  /// way from the loader to the observers (the view, the event queue, a remove event), and each copy
  /// then retains one object instead of one per string and array. Never mutated: a setter above
  /// replaces it.
  private var names: Names

  private final class Names: Sendable {
    let path: String
    /// `nil` when the name is the last component of `path`, as it nearly always is: made when asked for,
    /// not stored, so building an image makes no second string.
    let name: String?
    let buildID: BuildID?
    let architecture: String

    init(path: String, name: String?, buildID: BuildID?, architecture: String) {
      self.path = path
      self.name = name.flatMap { Image.isShortName($0, of: path) ? nil : $0 }
      self.buildID = buildID
      self.architecture = architecture
    }
  }

  package init(path: String, name: String? = nil, loadAddress: Address, loadBias: Address,
              textRange: Range<Address>, loadRange: Range<Address>, buildID: BuildID?,
              architecture: String, isMainExecutable: Bool, buildIDAddress: Address? = nil,
              fileMappedRange: Range<Address>? = nil) {
    names = Names(path: path, name: name, buildID: buildID, architecture: architecture)
    self.loadAddress = loadAddress
    self.loadBias = loadBias
    self.textRange = textRange
    self.loadRange = loadRange
    self.isMainExecutable = isMainExecutable
    self.buildIDAddress = buildIDAddress
    self.fileMappedRange = fileMappedRange ?? loadRange
  }

  // Value equality over every property, as a synthesized conformance would compare them.
  /// True when every property is equal (path, identity, ranges, architecture).
  public static func == (lhs: Image, rhs: Image) -> Bool {
    lhs.loadAddress == rhs.loadAddress && lhs.loadBias == rhs.loadBias && lhs.textRange == rhs.textRange
      && lhs.loadRange == rhs.loadRange && lhs.isMainExecutable == rhs.isMainExecutable
      && lhs.buildIDAddress == rhs.buildIDAddress && lhs.fileMappedRange == rhs.fileMappedRange
      && (lhs.names === rhs.names
        || (lhs.path == rhs.path && lhs.names.name == rhs.names.name && lhs.buildID == rhs.buildID
          && lhs.architecture == rhs.architecture))
  }

  /// Hashes the same properties `==` compares.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(path)
    hasher.combine(name)
    hasher.combine(loadAddress)
    hasher.combine(loadBias)
    hasher.combine(textRange)
    hasher.combine(loadRange)
    hasher.combine(buildID)
    hasher.combine(architecture)
    hasher.combine(isMainExecutable)
    hasher.combine(buildIDAddress)
    hasher.combine(fileMappedRange)
  }

  /// The size of `textRange` in bytes.
  public var textSize: UInt64 { textRange.upperBound - textRange.lowerBound }
  /// The end a crash report's `Binary Images` line gives: the last byte of the text range, inclusive
  /// (as Apple's and PLCrashReporter's are), or the load address when the text range is empty.
  package var crashLineEnd: Address { textSize == 0 ? loadAddress : textRange.upperBound - 1 }
  /// The size of `loadRange` in bytes.
  public var loadSize: UInt64 { loadRange.upperBound - loadRange.lowerBound }

  /// The last component of `path`.
  package static func shortName(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return path }
    return String(path[path.index(after: slash)...])
  }

  /// What `/proc/PID/maps` (and a core's `NT_FILE`) writes after the path of a mapped file that was
  /// deleted, or replaced by another file (a package upgrade renames the new file over the old), after
  /// it was mapped.
  package static let deletedMark = " (deleted)"

  /// `path` without `deletedMark`, and whether it had it: the path the file was loaded from.
  package static func withoutDeletedMark(_ path: String) -> (path: String, deleted: Bool) {
    path.hasSuffix(deletedMark) ? (String(path.dropLast(deletedMark.count)), true) : (path, false)
  }

  /// Whether `name == shortName(of: path)`, compared without making that string.
  static func isShortName(_ name: String, of path: String) -> Bool {
    let start = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
    return name == path[start...]
  }
}
