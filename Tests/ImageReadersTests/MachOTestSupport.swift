import ImageLogTestSupport
import Foundation
@testable import ImageReaders

/// The committed Mach-O fixtures (made by Scripts/make-fixtures) and the LLVM tools the tests compare with.
enum MachOFixtures {
  static let directory: String = {
    let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    return here.appendingPathComponent("Fixtures/macho").path
  }()

  /// Every fixture file: the thin and universal files, and the DWARF file inside the dSYM bundle.
  static let names: [String] = {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    let files = entries.filter { !$0.hasSuffix(".dSYM") }.sorted()
    return files + ["debugfixture.dSYM/Contents/Resources/DWARF/debugfixture"]
  }()

  static func path(_ name: String) -> String { directory + "/" + name }

  static func bytes(_ name: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path(name))))
  }

  static func parse(_ name: String) throws -> BinaryFile { try BinaryFile.parse(try bytes(name)) }

  /// Every decoded Mach-O in a fixture with the architecture name LLVM would give its slice.
  static func machOs(_ name: String) throws -> [MachOFile] {
    switch try parse(name) {
    case .machO(let file): return [file]
    case .fat(let fat): return try fat.members.map { try $0.file.get() }
    case .elf: return []
    }
  }
}

/// Runs LLVM and binutils tools for the comparisons, in the fixtures folder (a missing tool makes the
/// test skip: `haveTool` in its condition trait).
enum Tool {
  /// Standard output of `arguments`, run with the fixtures folder as working directory.
  static func run(_ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.currentDirectoryURL = URL(fileURLWithPath: MachOFixtures.directory)
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
  }
}

/// `llvm-otool -l` output, one entry per slice: the header numbers and each load command's fields.
struct OtoolSlice {
  struct Command {
    var fields: [(key: String, value: String)] = []
    var sections: [[String: String]] = []
    func value(_ key: String) -> String? { fields.first { $0.key == key }?.value }
    func values(_ key: String) -> [String] { fields.filter { $0.key == key }.map(\.value) }
  }
  var architecture: String?
  var header: [String: String] = [:]
  var commands: [Command] = []

  static let multiWordKeys = ["time stamp", "current version", "compatibility version"]

  static func parse(_ text: String) -> [OtoolSlice] {
    var slices: [OtoolSlice] = []
    var current: OtoolSlice?
    var headerNames: [String]?
    var inSection = false
    for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
      let line = rawLine.trimmingCharacters(in: .whitespaces)
      if rawLine.hasSuffix(":") && !rawLine.hasPrefix(" ") {
        if let slice = current { slices.append(slice) }
        current = OtoolSlice()
        if let open = rawLine.range(of: "(architecture ") {
          current?.architecture = String(rawLine[open.upperBound...].dropLast(2))
        }
        continue
      }
      if line == "Mach header" { headerNames = []; continue }
      if let names = headerNames {
        let words = line.split(separator: " ").map(String.init)
        if names.isEmpty { headerNames = words; continue }
        for (name, word) in zip(names, words) { current?.header[name] = word }
        headerNames = nil
        continue
      }
      if line.hasPrefix("Load command ") { current?.commands.append(Command()); inSection = false; continue }
      if line == "Section", var slice = current, let last = slice.commands.indices.last {
        slice.commands[last].sections.append([:])
        current = slice
        inSection = true
        continue
      }
      guard !line.isEmpty, current?.commands.isEmpty == false else { continue }
      var key: String
      var value: String
      if let multi = multiWordKeys.first(where: { line.hasPrefix($0 + " ") }) {
        key = multi
        value = String(line.dropFirst(multi.count + 1))
      } else if let space = line.firstIndex(of: " ") {
        key = String(line[..<space])
        value = String(line[line.index(after: space)...]).trimmingCharacters(in: .whitespaces)
      } else {
        key = line
        value = ""
      }
      let last = current!.commands.count - 1
      if inSection && key != "cmd" {
        let sectionIndex = current!.commands[last].sections.count - 1
        current!.commands[last].sections[sectionIndex][key] = value
      } else {
        inSection = false
        current!.commands[last].fields.append((key, value))
      }
    }
    if let slice = current { slices.append(slice) }
    return slices
  }
}

/// `0x%016llx` / `0x%08x` as otool prints addresses.
func otoolHex(_ value: UInt64, is64Bit: Bool) -> String {
  "0x" + hexDigits(value, width: is64Bit ? 16 : 8)
}
