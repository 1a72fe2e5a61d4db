import ImageLog
import ImageReaders

/// `imagelog file PATH...`: what crash tooling asks of binaries that are not running — per slice the
/// text range, architecture and build-id/UUID (the crash line), a detailed view, JSON, or the
/// `llvm-dwarfdump --uuid` line. Every path is read on its own: a bad one prints one line on stderr
/// and the rest are still read.
struct FileCommand: Command {
  static let name = "file"
  static let abstract = "Describe ELF and Mach-O files: build-id/UUID, architecture, text range, dependencies."
  static let usage = "imagelog file [--format <style>] [--uuid] [--arch <name>] [--entitlements] [-r] <path> ..."
  static let helpSections = """
    ARGUMENTS:
      <path>                  ELF or Mach-O files (thin or universal), .dSYM bundles (their DWARF files);
                              with -r, folders too.

    OPTIONS:
      --format <style>        crash (default), detailed or json.
                              crash: one Binary Images line per slice,
                                0xSTART - 0xEND name arch  <uuid> path
                              (link-time text range, END inclusive; 32 zeros without a build-id).
      --uuid                  Print 'UUID: XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX (arch) path' per slice,
                              as llvm-dwarfdump --uuid does (ELF: the build-id's first 16 bytes).
      --arch <name>           Only the slice for this architecture (x86_64, arm64, i386, ...; aarch64,
                              amd64, i686, powerpc64 are accepted too).
      --entitlements          Print a Mach-O slice's entitlements (as stored; JSON with --format json).
      -r, --recursive         Walk folders; files that are not ELF or Mach-O are skipped silently.
      -h, --help              Show help information.

    EXIT STATUS:
      0 when every file was read, 1 when any failed (each failure is one line on standard error), 64 for usage errors.
    """

  /// How each slice is printed.
  enum Style: String, CaseIterable {
    case crash, detailed, json
  }

  var paths: [String]
  var style: Style
  var printUUIDs: Bool
  var architecture: String?
  var printEntitlements: Bool
  var recursive: Bool

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    let formatName = try scanner.option("--format", command: Self.name, usage: Self.usage)
    if let formatName {
      guard let style = Style(rawValue: formatName) else {
        throw UsageError(message: "The value '\(formatName)' is invalid for '--format <style>' (crash, detailed, json)",
                         commandName: Self.name, usage: Self.usage)
      }
      self.style = style
    } else {
      style = .crash
    }
    architecture = try scanner.option("--arch", command: Self.name, usage: Self.usage)
    printUUIDs = scanner.flag("--uuid")
    printEntitlements = scanner.flag("--entitlements")
    recursive = scanner.flag("-r", "--recursive")
    paths = try scanner.positionals(command: Self.name, usage: Self.usage)
    guard !paths.isEmpty else {
      throw UsageError(message: "Missing expected argument '<path> ...'", commandName: Self.name, usage: Self.usage)
    }
    if printUUIDs && printEntitlements {
      throw UsageError(message: "--uuid and --entitlements cannot be combined", commandName: Self.name, usage: Self.usage)
    }
  }

  func run() throws -> ExitStatus {
    var failed = false
    let inputs = FileWalker.expand(paths, recursive: recursive) { path, problem in
      printError("imagelog: \(path): \(problem)")
      failed = true
    }
    var progress = ProgressLine(total: inputs.count)
    var json = JSONArrayPrinter()
    let jsonArray = style == .json && !printUUIDs && !printEntitlements  // entitlements print their own JSON
    if jsonArray { json.begin() }
    // One file at a time: reading on several threads was slower here, because every munmap in a
    // multi-threaded process flushes the other threads' TLBs.
    for input in inputs {
      progress.tick(input.path)
      switch Self.read(input.path) {
      case .failure(let problem):
        // A walk only reports files that look like binaries; named paths report every problem.
        if input.fromWalk && problem.meansNotABinary { continue }
        progress.clear()
        printError("imagelog: \(input.path): \(problem)")
        failed = true
      case .success(let binary):
        if !report(binary, path: input.path, json: &json, progress: &progress) { failed = true }
      }
    }
    progress.clear()
    if jsonArray { json.end() }
    return failed ? .failure : .success
  }

  /// Why a path could not be read: the file could not be mapped, or its bytes are not a binary we read.
  enum Problem: Error, Sendable, CustomStringConvertible {
    case open(MappedFile.OpenError)
    case format(FormatError)

    var description: String {
      switch self {
      case .open(let error): error.description
      case .format(let error): error.description
      }
    }

    /// True for files a folder walk skips silently: not ELF or Mach-O at all.
    var meansNotABinary: Bool {
      switch self {
      case .open(.empty), .open(.notRegularFile), .format(.notRecognized), .format(.tooShort): true
      default: false
      }
    }
  }

  /// Maps `path` and decodes it. The mapping is released before this returns: the decoded value
  /// keeps no reference to the bytes.
  static func read(_ path: String) -> Result<BinaryFile, Problem> {
    let file: MappedFile
    do { file = try MappedFile(path: path) } catch { return .failure(.open(error)) }
    return file.withReader { reader in
      if isJavaClassFile(reader) { return .failure(.format(.notRecognized(magic: 0xCAFE_BABE))) }
      do throws(FormatError) { return .success(try BinaryFile.parse(reader)) } catch { return .failure(.format(error)) }
    }
  }

  /// Java class files share `FAT_MAGIC` (0xcafebabe); like LLVM's `identify_magic` and file(1), a
  /// fourth header byte of 43 or more (a class file's major version) means "not universal", so folder
  /// walks skip them silently.
  static func isJavaClassFile(_ reader: ByteReader) -> Bool {
    guard reader.count >= 8, let magic = try? reader.peek(UInt32.self, at: 0), let version = try? reader.peek(UInt8.self, at: 7)
    else { return false }
    return magic == 0xBEBA_FECA && version >= 43  // 0xcafebabe read little-endian
  }

  /// Prints one file's selected slices in the chosen style; false when something about it failed.
  func report(_ binary: BinaryFile, path: String, json: inout JSONArrayPrinter,
              progress: inout ProgressLine) -> Bool {
    var ok = true
    if case .fat(let universal) = binary {
      // Slices that could not be read: one line each; the others are still shown.
      let failures = renderUniversalFailures(universal, path: path)
      if !failures.isEmpty { progress.clear() }
      for line in failures { printError(line) }
      ok = failures.isEmpty
    }
    let slices = binary.slices
    var indices = Array(slices.indices)
    if let architecture {
      let wanted = Self.canonicalArchitecture(architecture)
      indices = indices.filter { Self.canonicalArchitecture(slices[$0].architecture) == wanted }
      if indices.isEmpty {
        progress.clear()
        let present = slices.map(\.architecture).joined(separator: ", ")
        printError("imagelog: \(path): no slice for architecture \(architecture) (has \(present.isEmpty ? "none" : present))")
        return false
      }
    }
    if printEntitlements { return reportEntitlements(binary, path: path, indices: indices, progress: &progress) && ok }
    let renderer = binary.formatRenderer as? FileDetailRendering
    for index in indices {
      let slice = slices[index]
      if printUUIDs {
        // llvm-dwarfdump --uuid prints nothing for a file without a UUID; so do we.
        if let buildID = slice.buildID { printOutput("UUID: \(buildID.uuid) (\(slice.architecture)) \(path)") }
        continue
      }
      switch style {
      case .crash:
        printOutput(Self.crashLine(slice, path: path))
      case .detailed:
        var lines = Self.commonDetailedLines(slice, path: path, sliceCount: slices.count)
        lines += (renderer?.detailedLines(slice: index) ?? []).map { "  " + $0 }
        printOutput(lines.joined(separator: "\n") + "\n")
      case .json:
        var members = Self.commonJSONMembers(slice, path: path)
        members += renderer?.jsonMembers(slice: index) ?? []
        json.element(.object(members))
      }
    }
    return ok
  }

  func reportEntitlements(_ binary: BinaryFile, path: String, indices: [Int], progress: inout ProgressLine) -> Bool {
    guard let source = binary.formatRenderer as? EntitlementsRendering else {
      progress.clear()
      printError("imagelog: \(path): entitlements are stored only in Mach-O code signatures")
      return false
    }
    var ok = true
    for index in indices {
      do {
        if let text = try source.entitlements(slice: index, json: style == .json) { printOutput(text) }
      } catch {
        progress.clear()
        printError("imagelog: \(path): \(error)")
        ok = false
      }
    }
    return ok
  }

  /// `--arch` accepts the names other tools use for the same architecture (LLVM triples, Debian).
  static func canonicalArchitecture(_ name: String) -> String {
    switch name.lowercased() {
    case "aarch64": "arm64"
    case "amd64", "x86-64": "x86_64"
    case "i486", "i586", "i686", "x86": "i386"
    case "powerpc": "ppc"
    case "powerpc64": "ppc64"
    case "powerpc64le": "ppc64le"
    default: name
    }
  }

  /// `0xSTART - 0xEND name arch  <uuid> path`: Apple's Binary Images line for a slice, from its link-time
  /// text range (END is the last byte, inclusive), written by the same `ImageFormatter` as
  /// `imagelog list` (32 zeros when the slice has no build-id or UUID).
  static func crashLine(_ slice: SliceSummary, path: String) -> String {
    let image = Image(path: path, loadAddress: slice.textVMRange.lowerBound, loadBias: 0, textRange: slice.textVMRange,
                      loadRange: slice.loadVMRange, buildID: slice.buildID, architecture: slice.architecture,
                      isMainExecutable: false)
    return crashFormatter.format(image)
  }

  static let crashFormatter = ImageFormatter(style: .crash)

  /// The detailed view's lines that every format has (from `SliceSummary`).
  static func commonDetailedLines(_ slice: SliceSummary, path: String, sliceCount: Int) -> [String] {
    var lines = [sliceCount > 1 ? "\(path) (\(slice.architecture)):" : "\(path):"]
    func add(_ label: String, _ value: String) { lines.append("  " + detailLine(label, value)) }
    add("architecture", slice.architecture)
    add("type", slice.fileType)
    if let buildID = slice.buildID {
      add(buildID.bytes.count == 16 ? "uuid" : "build-id", buildID.bytes.count == 16 ? buildID.uuid : buildID.hex)
      if buildID.bytes.count != 16 { add("uuid", buildID.uuid) }
    } else {
      add("build-id", "none")
    }
    add("text", rangeText(slice.textVMRange))
    add("load extent", rangeText(slice.loadVMRange))
    if slice.fileOffset != 0 { add("file offset", "0x" + hexDigits(slice.fileOffset)) }
    if let installName = slice.installName { add("install name", installName) }
    for (index, dependency) in slice.dependencies.enumerated() { add(index == 0 ? "needs" : "", dependency) }
    return lines
  }

  static func rangeText(_ range: Range<UInt64>) -> String {
    "0x\(hexDigits(range.lowerBound)) - 0x\(hexDigits(range.upperBound)) (0x\(hexDigits(range.upperBound - range.lowerBound)) bytes)"
  }

  /// The JSON members every format has (from `SliceSummary`); addresses as hex strings, sizes as numbers.
  static func commonJSONMembers(_ slice: SliceSummary, path: String) -> [(String, JSONValue)] {
    [
      ("path", .string(path)),
      ("architecture", .string(slice.architecture)),
      ("fileType", .string(slice.fileType)),
      ("buildID", slice.buildID.map { .string(HexText.bytes($0.bytes)) } ?? .null),
      ("uuid", slice.buildID.map { .string(HexText.uuid($0.bytes)) } ?? .null),
      ("textStart", .string(HexText.address(slice.textVMRange.lowerBound))),
      ("textEnd", .string(HexText.address(slice.textVMRange.upperBound))),
      ("textSize", .number(slice.textVMRange.upperBound - slice.textVMRange.lowerBound)),
      ("loadStart", .string(HexText.address(slice.loadVMRange.lowerBound))),
      ("loadEnd", .string(HexText.address(slice.loadVMRange.upperBound))),
      ("installName", slice.installName.map { .string($0) } ?? .null),
      ("dependencies", .array(slice.dependencies.map { .string($0) })),
      ("fileOffset", .number(slice.fileOffset)),
    ]
  }
}

/// One `label:  value` line of the detailed view, values aligned in one column (label "" continues
/// the previous line's list). Every format's renderer uses the same column (15, as
/// `renderMachODetails` does) so the lines agree.
func detailLine(_ label: String, _ value: String) -> String {
  let head = label.isEmpty ? "" : label + ":"
  return head + String(repeating: " ", count: max(1, 15 - head.count)) + value
}

/// A format's own part of `imagelog file`'s detailed and JSON views: ELF's is in FileCommand+ELF.swift,
/// Mach-O's and universal files' in FileCommand+MachO.swift. A format without one gets the
/// `SliceSummary` view only. `index` is the slice's index in `BinaryFile.slices`.
protocol FileDetailRendering {
  /// Lines after the common ones in the detailed view (the caller indents them by two spaces).
  func detailedLines(slice index: Int) -> [String]
  /// Members after the common ones in the slice's JSON object.
  func jsonMembers(slice index: Int) -> [(String, JSONValue)]
}

/// `--entitlements`: formats that store entitlements (Mach-O code signatures) conform.
protocol EntitlementsRendering {
  /// Slice `index`'s entitlements as stored (the XML plist), or as JSON when `json`; `nil` when it has none.
  func entitlements(slice index: Int, json: Bool) throws -> String?
}

extension BinaryFile {
  /// The decoded file as a value the per-format views can be asked of (`as? FileDetailRendering`).
  var formatRenderer: Any {
    switch self {
    case .elf(let file): file
    case .machO(let file): file
    case .fat(let file): file
    }
  }
}
