import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// `minidump-stackwalk` (rust-minidump 0.25.0) as the oracle of the minidump reader and writer: its
/// `--json` report and its `--dump` listing of every raw structure, parsed without Foundation.
struct StackwalkOracle {
  /// The `--json` report.
  var json: JSONValue
  /// The `--dump` listing: each block's title (`MINIDUMP_THREAD`, `CONTEXT_AMD64`, ...) and its
  /// `name = value` fields, in order.
  var blocks: [(title: String, fields: [String: String])]

  /// Runs `minidump-stackwalk --json` and `--dump` on `path`; nil when the tool is not installed.
  static func run(_ path: String) throws -> StackwalkOracle? {
    guard let tool = pipelineTool("minidump-stackwalk") else { return nil }
    let json = try runTool([tool, "--json", path])
    try #require(json.status == 0, "minidump-stackwalk --json failed: \(json.error)")
    let dump = try runTool([tool, "--dump", path])
    try #require(dump.status == 0, "minidump-stackwalk --dump failed: \(dump.error)")
    return StackwalkOracle(json: try JSONValue.parse(json.output[...]), blocks: parseDump(dump.output))
  }

  /// Blocks start at lines without indentation; fields are indented `key = value` lines whose key
  /// starts with a letter or `(` (the memory listings' hex lines start with a digit).
  static func parseDump(_ text: String) -> [(title: String, fields: [String: String])] {
    var blocks: [(title: String, fields: [String: String])] = []
    for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
      if let first = line.first, first != " " {
        blocks.append((String(line), [:]))
        continue
      }
      let trimmed = line.drop { $0 == " " }
      guard let first = trimmed.first, first.isLetter || first == "(", let equals = trimmed.range(of: " = "),
            !blocks.isEmpty else { continue }
      let key = String(trimmed[..<equals.lowerBound]).trimmingSpaces
      guard !key.contains(":") else { continue }
      blocks[blocks.count - 1].fields[key] = String(trimmed[equals.upperBound...]).trimmingSpaces
    }
    return blocks
  }

  /// The fields of every block titled `title`, in order.
  func blocks(_ title: String) -> [[String: String]] { blocks.filter { $0.title == title }.map(\.fields) }

  /// The context block right after each block titled `owner` (a thread's, the exception's), by index.
  func contexts(after owner: String) -> [[String: String]] {
    var result: [[String: String]] = []
    for (index, block) in blocks.enumerated() where block.title == owner {
      if let next = blocks[(index + 1)...].first(where: { $0.title.hasPrefix("CONTEXT_") }) { result.append(next.fields) }
    }
    return result
  }

  /// A `--dump` value as a number: `0x...` hex, else decimal (a date after the number is ignored).
  static func number(_ text: String?) -> UInt64? {
    guard let word = text?.split(separator: " ").first else { return nil }
    return word.hasPrefix("0x") ? UInt64(word.dropFirst(2), radix: 16) : UInt64(word)
  }

  /// A `--dump` string value without its quotes.
  static func unquoted(_ text: String?) -> String? {
    guard let text, text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 else { return text }
    return String(text.dropFirst().dropLast())
  }
}

extension StringProtocol {
  var trimmingSpaces: String { String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()) }
}

extension JSONValue {
  /// A JSON `"0x..."` string or number as a value.
  var hexValue: UInt64? {
    if case .string(let text) = self, text.hasPrefix("0x") { return UInt64(text.dropFirst(2), radix: 16) }
    return unsigned
  }
}

/// The comparisons every dump gets, whoever wrote it: what our reader decodes against what
/// `minidump-stackwalk` prints. Each returns how many values it compared, so a test can require that
/// it compared something.
enum MinidumpOracleChecks {
  /// Threads (tids, names, every register of every context), modules (path, base, size, build-id, debug
  /// id, CodeView signature), the memory list, the exception and its context, system and misc info.
  @discardableResult
  static func expectSame(_ dump: MinidumpFile, _ oracle: StackwalkOracle,
                         sourceLocation: SourceLocation = #_sourceLocation) -> Int {
    var compared = 0
    func same<T: Equatable>(_ ours: T?, _ theirs: T?, _ what: String) {
      #expect(ours == theirs, "\(what): ours \(String(describing: ours)), minidump-stackwalk \(String(describing: theirs))",
              sourceLocation: sourceLocation)
      compared += 1
    }
    #expect(dump.problems.isEmpty, "problems: \(dump.problems)", sourceLocation: sourceLocation)
    // Threads, from --dump (every field) and --json (names).
    let threads = oracle.blocks("MINIDUMP_THREAD")
    same(dump.threads.count, threads.count, "thread count")
    let contexts = oracle.contexts(after: "MINIDUMP_THREAD")
    for (index, (ours, theirs)) in zip(dump.threads, threads).enumerated() {
      same(UInt64(ours.tid), StackwalkOracle.number(theirs["thread_id"]), "thread \(index) tid")
      same(ours.teb, StackwalkOracle.number(theirs["teb"]), "thread \(index) teb")
      same(UInt64(ours.priority), StackwalkOracle.number(theirs["priority"]), "thread \(index) priority")
      same(ours.stack.startAddress, StackwalkOracle.number(theirs["stack.start_of_memory_range"]), "thread \(index) stack")
      same(UInt64(ours.stack.location.dataSize), StackwalkOracle.number(theirs["stack.memory.data_size"]), "thread \(index) stack size")
      if index < contexts.count { compareContext(ours.context, contexts[index], "thread \(index)", same) }
    }
    let jsonThreads = oracle.json["threads"]?.array ?? []
    same(dump.threads.count, jsonThreads.count, "JSON thread count")
    for (index, (ours, theirs)) in zip(dump.threads, jsonThreads).enumerated() {
      same(UInt64(ours.tid), theirs["thread_id"]?.unsigned, "JSON thread \(index) tid")
      same(ours.name, theirs["thread_name"]?.string, "thread \(index) name")
    }
    // Modules.
    let modules = oracle.blocks("MINIDUMP_MODULE")
    let jsonModules = oracle.json["modules"]?.array ?? []
    same(dump.modules.count, modules.count, "module count")
    for (index, ((ours, theirs), json)) in zip(zip(dump.modules, modules), jsonModules).enumerated() {
      same(ours.baseAddress, StackwalkOracle.number(theirs["base_of_image"]), "module \(index) base")
      same(UInt64(ours.size), StackwalkOracle.number(theirs["size_of_image"]), "module \(index) size")
      same(ours.name, StackwalkOracle.unquoted(theirs["(code_file)"]), "module \(index) path")
      same(ours.codeFileName, json["filename"]?.string, "JSON module \(index) file name")
      same(ours.codeIdentifier(platformID: dump.systemInfo?.platformID), StackwalkOracle.unquoted(theirs["(code_identifier)"]).flatMap { $0 == "id" ? nil : $0 },
           "module \(index) code id")
      same(ours.baseAddress, json["base_addr"]?.hexValue, "JSON module \(index) base")
      same(ours.addressRange.upperBound, json["end_addr"]?.hexValue, "JSON module \(index) end")
      same(ours.debugIdentifier ?? String(repeating: "0", count: 33), json["debug_id"]?.string, "module \(index) debug id")
      same(ours.codeIdentifier(platformID: dump.systemInfo?.platformID), json["code_id"]?.string, "JSON module \(index) code id")
      same(ours.debugFileName, json["debug_file"]?.string, "module \(index) debug file")
      same(UInt64(ours.versionInfo.fileType), StackwalkOracle.number(theirs["version_info.file_type"]), "module \(index) file type")
    }
    // The memory list as --dump lists it (our ranges merge the stacks in: compare by address).
    for (index, region) in oracle.blocks("MINIDUMP_MEMORY_DESCRIPTOR").enumerated() {
      guard let start = StackwalkOracle.number(region["start_of_memory_range"]),
            let size = StackwalkOracle.number(region["memory.data_size"]) else { continue }
      same(dump.fileRange(ofMemory: start, length: Int(size)).map { UInt64($0.lowerBound) },
           StackwalkOracle.number(region["memory.rva"]), "memory range \(index) at 0x\(hexDigits(start))")
    }
    // Exception.
    if let exception = oracle.blocks("MINIDUMP_EXCEPTION").first {
      same(dump.exception.map { UInt64($0.tid) }, StackwalkOracle.number(exception["thread_id"]), "exception thread")
      same(dump.exception.map { UInt64($0.code) }, StackwalkOracle.number(exception["exception_record.exception_code"]), "exception code")
      same(dump.exception.map { UInt64($0.flags) }, StackwalkOracle.number(exception["exception_record.exception_flags"]), "exception flags")
      same(dump.exception?.address, StackwalkOracle.number(exception["exception_record.exception_address"]), "exception address")
      same(dump.exception.map { UInt64($0.parameters.count) }, StackwalkOracle.number(exception["exception_record.number_parameters"]),
           "exception parameters")
      if let context = oracle.contexts(after: "MINIDUMP_EXCEPTION").first {
        compareContext(dump.exception?.context, context, "exception", same)
      }
      same(dump.exception?.crashAddress(dump.systemInfo), oracle.json["crash_info"]?["address"]?.hexValue, "JSON crash address")
      same(dump.exception?.reason(dump.systemInfo), oracle.json["crash_info"]?["type"]?.string, "JSON crash reason")
      let crashed = oracle.json["crash_info"]?["crashing_thread"]?.unsigned
      same(dump.threads.firstIndex { $0.tid == dump.exception?.tid }.map(UInt64.init), crashed, "crashing thread")
      // The crashed thread's frame 0 registers in the JSON are the exception context's.
      if let registers = oracle.json["crashing_thread"]?["frames"]?.array?.first?["registers"],
         case .object(let members) = registers {
        for (name, value) in members { same(dump.exception?.context?[name], value.hexValue, "JSON crashing register \(name)") }
      }
    } else {
      same(dump.exception == nil, true, "no exception")
    }
    // System and misc info.
    if let ours = dump.systemInfo {
      same(ours.platformName, oracle.json["system_info"]?["os"]?.string, "JSON os")
      same(ours.osVersionText, oracle.json["system_info"]?["os_ver"]?.string, "JSON os_ver")
      same(ours.cpuName, oracle.json["system_info"]?["cpu_arch"]?.string, "JSON cpu_arch")
    }
    if let system = oracle.blocks("MINIDUMP_SYSTEM_INFO").first, let ours = dump.systemInfo {
      same(UInt64(ours.processorArchitecture), StackwalkOracle.number(system["processor_architecture"]), "architecture")
      same(UInt64(ours.processorLevel), StackwalkOracle.number(system["processor_level"]), "processor level")
      same(UInt64(ours.processorRevision), StackwalkOracle.number(system["processor_revision"]), "processor revision")
      same(UInt64(ours.processorCount), StackwalkOracle.number(system["number_of_processors"]), "processors")
      same(UInt64(ours.majorVersion), StackwalkOracle.number(system["major_version"]), "major version")
      same(UInt64(ours.minorVersion), StackwalkOracle.number(system["minor_version"]), "minor version")
      same(UInt64(ours.buildNumber), StackwalkOracle.number(system["build_number"]), "build number")
      same(UInt64(ours.platformID), StackwalkOracle.number(system["platform_id"]), "platform")
      same("\(ours.majorVersion).\(ours.minorVersion).\(ours.buildNumber) \(ours.csdVersion ?? "")".trimmingSpaces,
           system["(version)"], "OS version and CSD string")
    }
    if let misc = oracle.blocks("MINIDUMP_MISC_INFO").first, let ours = dump.miscInfo {
      same(UInt64(ours.size), StackwalkOracle.number(misc["size_of_info"]), "misc info size")
      // --dump prints flags1 in hex without 0x.
      same(UInt64(ours.flags), misc["flags1"].flatMap { UInt64($0, radix: 16) }, "misc info flags")
      same(ours.processID.map(UInt64.init), StackwalkOracle.number(misc["process_id"]), "process id")
      same(ours.processID.map(UInt64.init), oracle.json["pid"]?.unsigned, "JSON pid")
      if let created = ours.processCreateTime {
        same(UInt64(created), StackwalkOracle.number(misc["process_create_time"]), "process create time")
      }
      if let build = ours.buildString { same(build, misc["build_string"], "build string") }
      if let debug = ours.debugBuildString { same(debug, misc["dbg_bld_str"], "debug build string") }
    }
    if let names = oracle.blocks("MINIDUMP_THREAD_NAME") as [[String: String]]?, !names.isEmpty {
      same(dump.threadNames.map(\.name), names.map { StackwalkOracle.unquoted($0["name"]) ?? "" }, "thread names stream")
    }
    return compared
  }

  /// Every register `--dump` prints for a context that our layout names too (`context_flags` as well).
  static func compareContext(_ ours: MinidumpContext?, _ theirs: [String: String], _ what: String,
                             _ same: (UInt64?, UInt64?, String) -> Void) {
    same(ours?.flags, StackwalkOracle.number(theirs["context_flags"]), "\(what) context flags")
    guard let ours else { return }
    // --dump's names for the registers our layouts name otherwise: `x29 (fp)`, `iregs[ 3]` (ARM's and
    // Breakpad's old arm64 array, in the order of our names), `mx_csr`.
    var compared = 0
    for (name, text) in theirs {
      var ourName = name == "mx_csr" ? "mxcsr" : name
      if let open = ourName.firstIndex(of: "("), ourName.hasSuffix(")") {
        ourName = String(ourName[ourName.index(after: open)..<ourName.index(before: ourName.endIndex)])
      }
      if ourName.hasPrefix("iregs["), let number = Int(ourName.dropFirst(6).dropLast().trimmingSpaces), number < ours.names.count {
        ourName = ours.names[number]
      }
      guard let value = ours[ourName] else { continue }
      same(value, StackwalkOracle.number(text), "\(what) \(ourName)")
      compared += 1
    }
    same(UInt64(compared >= 16 ? 1 : 0), 1, "\(what): \(compared) registers compared")
  }
}
