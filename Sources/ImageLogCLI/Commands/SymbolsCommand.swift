#if canImport(Glibc)
internal import Glibc
#endif

import ImageLog
import Symbolication
import BreakpadSymbolWriter
import ImageReaders

/// `imagelog symbols FILE`: the Breakpad symbol file of a binary, as `dump_syms` writes it, to standard
/// output, a file, or a symbol store (`DIR/NAME/DEBUGID/NAME.sym`).
struct SymbolsCommand: Command {
  static let name = "symbols"
  static let abstract = "Write the Breakpad symbol file (.sym) of a binary, as dump_syms does."
  static let usage = "imagelog symbols [--inlines] [--arch <name>] [-o <file> | --store <dir>] [--search <path> ...] <file> ..."
  static let helpSections = """
    ARGUMENTS:
      <file>                  An ELF file, a thin or universal Mach-O file, or a .dSYM bundle. Several
                              with --store only.

    OPTIONS:
      --inlines               Write INLINE_ORIGIN and INLINE records (dump_syms --inlines): which
                              functions were inlined where, and line records of the innermost one.
      --arch <name>           The slice of a universal file (arm64, x86_64, ...).
      -o, --output <file>     Write to this file (replaced once complete; a stream such as a pipe is
                              written in place) instead of standard output.
      --store <dir>           Write to <dir>/NAME/DEBUGID/NAME.sym, as dump_syms -s does (the layout
                              symbol servers and minidump-stackwalk --symbols-path read).
      --search <path>         A folder or file holding debug files (repeatable), as for symbolicate.
      --no-system-debug       Do not look in /usr/lib/debug or the debuginfod cache.
      -h, --help              Show help information.

    An ELF file without DWARF gets its debug file as symbolicate finds it: by build-id under
    /usr/lib/debug/.build-id, by .gnu_debuglink, in the --search paths, through debuginfod; a
    dwz-compressed debug file gets its .gnu_debugaltlink file. A Mach-O file gets the .dSYM next to
    it. The records are dump_syms 2.3.5's, with the differences imagelog's README lists (C++ names as
    c++filt writes them, Swift names as Swift's backtracer writes them, 'm' only for addresses with
    several symbols, DWARF 5 paths not doubled).

    EXIT STATUS:
      0 when every file was written, 1 when any failed (each failure is one line on standard error), 64 for usage errors.
    """

  var paths: [String]
  var inlines: Bool
  var architecture: String?
  var outputPath: String?
  var storeDirectory: String?
  var searchPaths: [String]
  var systemDirectories: Bool

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    inlines = scanner.flag("--inlines")
    architecture = try scanner.option("--arch")
    outputPath = try scanner.option("-o", "--output")
    storeDirectory = try scanner.option("--store")
    searchPaths = try scanner.options("--search")
    systemDirectories = !scanner.flag("--no-system-debug")
    paths = try scanner.positionals()
    guard !paths.isEmpty else {
      throw scanner.usageError("Missing expected argument '<file>'")
    }
    if outputPath != nil && storeDirectory != nil {
      throw scanner.usageError("-o and --store cannot be combined")
    }
    if paths.count > 1 && storeDirectory == nil {
      throw scanner.usageError("Several files need --store (one .sym file each)")
    }
  }

  func run() throws -> ExitStatus {
    let locator = DebugFileLocator(searchPaths: searchPaths, systemDirectories: systemDirectories)
    let options = BreakpadSymbols.Options(inlines: inlines, architecture: architecture,
                                          generator: "imagelog \(ImageLogMain.version)")
    var status = ExitStatus.success
    for path in paths {
      let symbols: BreakpadSymbols
      do {
        symbols = try BreakpadSymbols(path: path, options: options, locator: locator)
      } catch {
        printError("imagelog: \(error)")
        status = .failure
        continue
      }
      let destination: String?
      if let storeDirectory {
        let folder = storeDirectory + "/" + symbols.name + "/" + symbols.debugID
        guard FileSystem.makeFolders(folder) else {
          printError("imagelog: \(folder): cannot create: \(String(cString: strerror(errno)))")
          status = .failure
          continue
        }
        destination = folder + "/" + symbols.name + ".sym"
      } else {
        destination = outputPath
      }
      if !Self.write(symbols, to: destination) { status = .failure }
      for note in symbols.notes { printError("imagelog: note: \(note)") }
    }
    return status
  }

  /// Writes to standard output, or to a temporary file beside `path` renamed over it once complete
  /// (a reader never sees half a file).
  static func write(_ symbols: BreakpadSymbols, to path: String?) -> Bool {
    guard let path else {
      guard symbols.write(to: 1) else {
        printError("imagelog: standard output: cannot write: \(String(cString: strerror(errno)))")
        return false
      }
      return true
    }
    do {
      try writeNamedOutput(path) { symbols.write(to: $0) }
    } catch {
      printError("imagelog: \(path): \(error)")
      return false
    }
    return true
  }
}
