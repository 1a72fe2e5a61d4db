internal import Glibc

import ImageLog
import ImageReaders

/// File, line and column (and inlined frames) from DWARF, by driving one `llvm-symbolizer` process in
/// batch mode for a whole report: every query goes to it at once, one `"OBJECT" 0xADDRESS` line each,
/// and its JSON answers (`--output-style=JSON`) come back in order.
///
/// Limits: needs `llvm-symbolizer` on `PATH` (or given); DWARF only (no line tables from symbol
/// tables); a universal Mach-O slice is named `path:arch`; addresses are link-time addresses.
public struct LineSymbolizer: Sendable {
  /// One source location; the first of a query's answers is the innermost inlined frame.
  public struct Location: Sendable, Equatable {
    /// The function as DWARF names it (linkage name when there is one, mangled).
    public var function: String?
    /// The source file as DWARF names it (joined to the compilation directory).
    public var file: String
    /// 1-based line.
    public var line: Int
    /// 1-based column; 0 when unknown.
    public var column: Int
  }

  /// The tool's path.
  public let executable: String

  /// Finds `llvm-symbolizer` (then `llvm-symbolizer-NN` for NN from 20 down to 11) on `PATH`.
  public static func find() -> LineSymbolizer? {
    if let explicit = FileSystem.environment("LLVM_SYMBOLIZER_PATH"), FileSystem.kind(explicit) == .file {
      return LineSymbolizer(executable: explicit)
    }
    let directories = (FileSystem.environment("PATH") ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
    let names = ["llvm-symbolizer"] + (11...20).reversed().map { "llvm-symbolizer-\($0)" }
    for name in names {
      for directory in directories where access(directory + "/" + name, X_OK) == 0 {
        return LineSymbolizer(executable: directory + "/" + name)
      }
    }
    return nil
  }

  /// A symbolizer that runs the tool at `executable`.
  public init(executable: String) { self.executable = executable }

  /// Looks up every `(object, address)` query in one run; the answer for a query is `[]` when the tool
  /// knows no line for it. Throws when the tool cannot be run.
  public func symbolize(_ queries: [(object: String, address: UInt64)]) throws(ReportError) -> [[Location]] {
    guard !queries.isEmpty else { return [] }
    var input = ""
    for query in queries {
      input += "\"" + query.object + "\" 0x" + String(query.address, radix: 16) + "\n"
    }
    let output = try run([executable, "--output-style=JSON", "--no-demangle", "--functions=linkage", "--inlines"], input: input)
    var answers: [[Location]] = []
    answers.reserveCapacity(queries.count)
    for line in output.split(separator: "\n") where line.hasPrefix("{") {
      guard let value = try? JSONValue.parse(line) else { answers.append([]); continue }
      var locations: [Location] = []
      for entry in value["Symbol"]?.array ?? [] {
        let lineNumber = entry["Line"]?.integer ?? 0
        let file = entry["FileName"]?.string ?? ""
        let function = entry["FunctionName"]?.string
        guard lineNumber > 0, !file.isEmpty, file != "??" else {
          if !locations.isEmpty { break }  // an inlined chain with no outer line: keep what we have
          continue
        }
        locations.append(Location(function: function == "??" ? nil : function, file: file,
                                  line: lineNumber, column: entry["Column"]?.integer ?? 0))
      }
      answers.append(locations)
    }
    guard answers.count == queries.count else {
      throw ReportError("\(executable) answered \(answers.count) of \(queries.count) queries")
    }
    return answers
  }

  /// Runs the tool with `input` on standard input (a temporary file, so neither side can block on a
  /// full pipe) and returns its standard output.
  private func run(_ arguments: [String], input: String) throws(ReportError) -> String {
    var template = Array("/tmp/imagelog-symbolize-XXXXXX".utf8CString)
    let inputDescriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    guard inputDescriptor >= 0 else { throw ReportError("cannot create a temporary file: \(String(cString: strerror(errno)))") }
    let inputPath = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    defer { close(inputDescriptor); unlink(inputPath) }
    guard writeAll(to: inputDescriptor, input) else { throw ReportError("cannot write a temporary file") }
    lseek(inputDescriptor, 0, SEEK_SET)
    var pipeEnds: [Int32] = [0, 0]
    guard pipe(&pipeEnds) == 0 else { throw ReportError("pipe failed") }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, inputDescriptor, 0)
    posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, arguments[0], &actions, nil, &argv, environ)
    close(pipeEnds[1])
    guard spawned == 0 else {
      close(pipeEnds[0])
      throw ReportError("cannot run \(arguments[0]): \(String(cString: strerror(spawned)))")
    }
    var output: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = buffer.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
      if count < 0 && errno == EINTR { continue }
      if count <= 0 { break }
      output += buffer[0..<count]
    }
    close(pipeEnds[0])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return String(decoding: output, as: UTF8.self)
  }
}
