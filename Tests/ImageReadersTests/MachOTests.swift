import ImageLogTestSupport
import Foundation
import Testing
@testable import ImageReaders

/// Every decoded field of every fixture slice against `llvm-otool-14 -l`. llvm-otool's `-l` is
/// `llvm-objdump --macho --private-headers --non-verbose` (same output, checked on a thin file below);
/// objdump's spelling is used because `llvm-otool-14 -arch all` shows only the host slice of a universal file.
@Suite struct MachOOtoolTests {
  static let otool = "llvm-otool-14"

  static func otoolOutput(_ name: String) throws -> String {
    try Tool.run(["llvm-objdump-14", "--macho", "--private-headers", "--non-verbose", "--arch=all", name])
  }

  @Test(.enabled(if: haveTool(otool) && haveTool("llvm-objdump-14"), "llvm-14 tools not installed; skipped"))
  func objdumpSpellingIsOtool() throws {
    let name = "fixture-arm64-ios-signed"
    #expect(try Tool.run([Self.otool, "-l", name]) == (try Self.otoolOutput(name)))
  }

  @Test(.enabled(if: haveTool("llvm-objdump-14"), "llvm-objdump-14 is not installed (Debian llvm-14); skipped"),
        arguments: MachOFixtures.names)
  func loadCommandsMatchOtool(name: String) throws {
    let files = try MachOFixtures.machOs(name)
    let slices = OtoolSlice.parse(try Self.otoolOutput(name))
    try #require(slices.count == files.count, "\(name): otool shows \(slices.count) slices, we read \(files.count)")
    for (file, slice) in zip(files, slices) {
      let context = "\(name) \(slice.architecture ?? "")"
      let header = file.header
      #expect(slice.header["magic"] == "0x" + hexDigits(UInt64(header.is64Bit ? MachOHeader.magic64 : MachOHeader.magic32)),
              "\(context)")
      #expect(slice.header["cputype"] == String(Int32(bitPattern: header.cpuType)), "\(context)")
      #expect(slice.header["cpusubtype"] == String(header.cpuSubtype & 0x00FF_FFFF), "\(context)")
      #expect(slice.header["caps"] == "0x" + hexDigits(UInt64(header.cpuSubtype >> 24), width: 2), "\(context)")
      #expect(slice.header["filetype"] == String(header.fileType), "\(context)")
      #expect(slice.header["ncmds"] == String(header.commandCount), "\(context)")
      #expect(slice.header["sizeofcmds"] == String(header.commandsSize), "\(context)")
      #expect(slice.header["flags"] == "0x" + hexDigits(UInt64(header.flags), width: 8), "\(context)")
      if let architecture = slice.architecture { #expect(architecture == file.architecture, "\(context)") }
      try #require(slice.commands.count == file.loadCommands.count, "\(context)")
      for (index, (command, theirs)) in zip(file.loadCommands, slice.commands).enumerated() {
        check(command, against: theirs, is64Bit: header.is64Bit, context: "\(context) load command \(index)")
      }
    }
  }

  func check(_ command: LoadCommand, against theirs: OtoolSlice.Command, is64Bit: Bool, context: String) {
    #expect(theirs.value("cmd") == command.name, "\(context)")
    func field(_ key: String, _ value: String, sourceLocation: SourceLocation = #_sourceLocation) {
      #expect(theirs.value(key) == value, "\(context) \(key)", sourceLocation: sourceLocation)
    }
    switch command {
    case .segment(let segment):
      field("segname", segment.name)
      field("vmaddr", otoolHex(segment.vmAddress, is64Bit: segment.is64Bit))
      field("vmsize", otoolHex(segment.vmSize, is64Bit: segment.is64Bit))
      field("fileoff", String(segment.fileOffset))
      field("filesize", String(segment.fileSize))
      field("maxprot", "0x" + hexDigits(UInt64(segment.maxProtection), width: 8))
      field("initprot", "0x" + hexDigits(UInt64(segment.initialProtection), width: 8))
      field("nsects", String(segment.sections.count))
      field("flags", "0x" + hexDigits(UInt64(segment.flags)))
      #expect(theirs.sections.count == segment.sections.count, "\(context)")
      for (section, other) in zip(segment.sections, theirs.sections) {
        #expect(other["sectname"] == section.name, "\(context)")
        #expect(other["segname"] == section.segmentName, "\(context)")
        #expect(other["addr"] == otoolHex(section.address, is64Bit: segment.is64Bit), "\(context) \(section.name)")
        #expect(other["size"] == otoolHex(section.size, is64Bit: segment.is64Bit), "\(context) \(section.name)")
        #expect(other["offset"] == String(section.fileOffset), "\(context) \(section.name)")
        #expect(other["align"] == "2^\(section.alignment) (\(1 << min(section.alignment, 62)))", "\(context)")
        #expect(other["reloff"] == String(section.relocationOffset), "\(context)")
        #expect(other["nreloc"] == String(section.relocationCount), "\(context)")
        #expect(other["flags"] == "0x" + hexDigits(UInt64(section.flags), width: 8), "\(context)")
      }
    case .uuid(let id):
      field("uuid", id.uuid)
    case .dylib(let dylib):
      #expect(theirs.value("name")?.hasPrefix(dylib.name + " (offset ") == true, "\(context) name")
      field("current version", dylib.currentVersion.description)
      field("compatibility version", dylib.compatibilityVersion.description)
      #expect(theirs.value("time stamp")?.hasPrefix("\(dylib.timestamp) ") == true, "\(context)")
    case .rpath(let path):
      #expect(theirs.value("path")?.hasPrefix(path + " (offset ") == true, "\(context) path")
    case .dylinker(let path):
      #expect(theirs.value("name")?.hasPrefix(path + " (offset ") == true, "\(context) name")
    case .buildVersion(let version):
      field("platform", version.platformName)
      field("minos", version.minimumOS.shortDescription)
      field("sdk", version.sdk.rawValue == 0 ? "n/a" : version.sdk.shortDescription)
      field("ntools", String(version.tools.count))
      #expect(theirs.values("tool") == version.tools.map { machOToolName($0.tool) }, "\(context)")
      #expect(theirs.values("version") == version.tools.map { $0.version.shortDescription }, "\(context)")
    case .versionMin(let version):
      field("version", version.version.shortDescription)
      field("sdk", version.sdk.rawValue == 0 ? "n/a" : version.sdk.shortDescription)
    case let .main(entry, stack):
      field("entryoff", String(entry))
      field("stacksize", String(stack))
    case .encryptionInfo(let info):
      field("cryptoff", String(info.cryptOffset))
      field("cryptsize", String(info.cryptSize))
      field("cryptid", String(info.cryptID))
    case .codeSignature(let data), .functionStarts(let data):
      field("dataoff", String(data.dataOffset))
      field("datasize", String(data.dataSize))
    case .symbolTable(let table):
      field("symoff", String(table.symbolOffset))
      field("nsyms", String(table.symbolCount))
      field("stroff", String(table.stringOffset))
      field("strsize", String(table.stringSize))
    case let .other(_, size):
      field("cmdsize", String(size))
    }
  }

  /// The load command kinds the issue names all appear in at least one fixture, so the checks above
  /// cover each of them.
  @Test func fixturesCoverEveryDecodedCommand() throws {
    var seen: Set<String> = []
    for name in MachOFixtures.names {
      for file in try MachOFixtures.machOs(name) { for command in file.loadCommands { seen.insert(command.name) } }
    }
    for name in ["LC_SEGMENT", "LC_SEGMENT_64", "LC_UUID", "LC_ID_DYLIB", "LC_LOAD_DYLIB", "LC_LOAD_WEAK_DYLIB",
                 "LC_REEXPORT_DYLIB", "LC_LAZY_LOAD_DYLIB", "LC_LOAD_UPWARD_DYLIB", "LC_RPATH", "LC_BUILD_VERSION",
                 "LC_VERSION_MIN_MACOSX", "LC_VERSION_MIN_IPHONEOS", "LC_MAIN", "LC_ENCRYPTION_INFO",
                 "LC_ENCRYPTION_INFO_64", "LC_CODE_SIGNATURE", "LC_SYMTAB", "LC_FUNCTION_STARTS",
                 "LC_LOAD_DYLINKER", "LC_DYSYMTAB"] {
      #expect(seen.contains(name), "no fixture has \(name)")
    }
  }
}

/// Architecture names, UUIDs, header flags and universal headers against the other LLVM tools.
@Suite struct MachOLLVMToolTests {
  @Test(.enabled(if: haveTool("llvm-dwarfdump-14"), "llvm-dwarfdump-14 is not installed; skipped"),
        arguments: MachOFixtures.names)
  func uuidsAndArchitecturesMatchDwarfdump(name: String) throws {
    let files = try MachOFixtures.machOs(name)
    let lines = try Tool.run(["llvm-dwarfdump-14", "--uuid", name]).split(separator: "\n")
    let withUUID = files.filter { $0.uuid != nil }
    try #require(lines.count == withUUID.count, "\(name): \(lines)")
    for (file, line) in zip(withUUID, lines) {
      // "UUID: XXXXXXXX-... (arch) path"; LLVM 14 prints "()" for ppc subtypes it has no name for.
      let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
      #expect(parts[1] == file.uuid?.uuid, "\(name)")
      if parts[2] != "()" { #expect(parts[2] == "(\(file.architecture))", "\(name)") }
    }
  }

  @Test(.enabled(if: haveTool("llvm-readobj-14"), "llvm-readobj-14 is not installed; skipped"),
        arguments: MachOFixtures.names.filter { !$0.hasPrefix("universal") })
  func headerFlagsMatchReadobj(name: String) throws {
    guard case .machO(let file) = try MachOFixtures.parse(name) else { Issue.record("\(name) not thin"); return }
    let text = try Tool.run(["llvm-readobj-14", "--file-headers", name])
    // Flags [ (0x100085)\n    MH_DYLDLINK (0x4)\n ... ]
    guard let start = text.range(of: "Flags [") , let end = text.range(of: "]", range: start.upperBound..<text.endIndex)
    else { Issue.record("\(name): no Flags in readobj output"); return }
    let theirs = text[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line -> String? in
      let word = line.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init)
      return word?.hasPrefix("MH_") == true ? String(word!.dropFirst(3)) : nil
    }
    #expect(Set(theirs) == Set(file.header.flagNames), "\(name)")
    #expect(text.contains("NumOfLoadCommands: \(file.header.commandCount)"), "\(name)")
  }

  @Test(.enabled(if: haveTool("llvm-objdump-14"), "llvm-objdump-14 is not installed; skipped"),
        arguments: MachOFixtures.names.filter { $0.hasPrefix("universal") })
  func universalHeadersMatchObjdump(name: String) throws {
    guard case .fat(let fat) = try MachOFixtures.parse(name) else { Issue.record("\(name) not universal"); return }
    let text = try Tool.run(["llvm-objdump-14", "--macho", "--universal-headers", name])
    #expect(text.contains("fat_magic \(fat.is64Bit ? "FAT_MAGIC_64" : "FAT_MAGIC")\n"))
    #expect(text.contains("nfat_arch \(fat.members.count)\n"))
    let blocks = text.components(separatedBy: "architecture ").dropFirst()
    try #require(blocks.count == fat.members.count)
    for (member, block) in zip(fat.members, blocks) {
      #expect(block.hasPrefix(member.architecture + "\n"), "\(name): \(block)")
      #expect(block.contains("    offset \(member.fileOffset)\n"), "\(name) \(member.architecture)")
      #expect(block.contains("    size \(member.size)\n"), "\(name) \(member.architecture)")
      #expect(block.contains("    align 2^\(member.alignment) "), "\(name) \(member.architecture)")
      let caps = member.cpuSubtype >> 24
      // objdump names the one capability bit it knows (0x80) and prints the others in hex.
      #expect(block.contains("    capabilities \(caps == 0x80 ? "CPU_SUBTYPE_LIB64" : "0x" + hexDigits(UInt64(caps)))\n"),
              "\(name)")
      let file = try member.file.get()
      #expect(file.header.cpuType == member.cpuType && file.header.cpuSubtype == member.cpuSubtype)
    }
    #expect(fat.slices.map(\.architecture) == fat.members.map(\.architecture))
    #expect(fat.slices.map(\.fileOffset) == fat.members.map(\.fileOffset))
  }

  @Test(.enabled(if: haveTool("llvm-lipo-14"), "llvm-lipo-14 is not installed; skipped"),
        arguments: MachOFixtures.names.filter { $0.hasPrefix("universal") })
  func architecturesMatchLipo(name: String) throws {
    let summaries = try MachOFixtures.parse(name).slices
    let theirs = try Tool.run(["llvm-lipo-14", name, "-archs"]).split(separator: " ").map {
      $0.trimmingCharacters(in: .whitespacesAndNewlines)
    }.filter { !$0.isEmpty }
    #expect(theirs == summaries.map(\.architecture))
  }
}

/// The crash-tooling summary of a slice, from the decoded commands otool was compared with above.
@Suite struct MachOSummaryTests {
  @Test func dylibSummary() throws {
    guard case .machO(let file) = try MachOFixtures.parse("libfixture-arm64-macos.dylib") else {
      Issue.record("not thin"); return
    }
    let summary = file.summary
    let text = try #require(file.segment(named: "__TEXT"))
    #expect(summary.textVMRange == text.vmAddress..<text.vmAddress + text.vmSize)
    #expect(summary.architecture == "arm64")
    #expect(summary.fileType == "dylib")
    // The recipe's -install_name.
    #expect(summary.installName == "@rpath/libfixture.dylib")
    #expect(summary.buildID == file.uuid)
  }

  @Test func executableSummarySkipsPageZero() throws {
    guard case .machO(let file) = try MachOFixtures.parse("fixture-arm64-macos") else { Issue.record("not thin"); return }
    let summary = file.summary
    let loaded = file.segments.filter { $0.name != "__PAGEZERO" }
    #expect(summary.loadVMRange.lowerBound == loaded.map(\.vmAddress).min())
    #expect(summary.loadVMRange.upperBound == loaded.map { $0.vmAddress + $0.vmSize }.max())
    #expect(summary.installName == nil)
    // The recipe links the dylib, a weak and a re-exported library, in that order.
    #expect(summary.dependencies == ["@rpath/libfixture.dylib", "/usr/lib/libweak.dylib", "/usr/lib/libre.dylib",
                                     "/usr/lib/libre.dylib"])
    #expect(file.rpaths == ["@executable_path/../Frameworks", "/opt/fixture/lib"])
    #expect(file.entryPoint != nil)
  }
}
