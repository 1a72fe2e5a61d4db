import ImageLogTestSupport
import Testing
@testable import ImageReaders

/// Every field the ELF reader reports, for every committed ELF fixture, against readelf
/// (`-h -lW -n -d -SW -wk`) and llvm-readobj-14 (`--file-headers --needed-libs --notes`).
@Suite struct ELFFixtureTests {
  static let names = Fixtures.all(in: "elf")

  static func decode(_ name: String) throws -> ELFFile {
    guard case .elf(let file) = try BinaryFile.parse(try Fixtures.bytes(name)) else {
      throw TestSupportError("\(name) is not read as ELF")
    }
    return file
  }

  @Test func fixturesCoverClassesOrdersAndKinds() throws {
    let files = try Self.names.map(Self.decode)
    #expect(files.count >= 20)
    #expect(files.contains { $0.header.is64Bit && $0.header.endian == .big })
    #expect(files.contains { !$0.header.is64Bit && $0.header.endian == .big })
    #expect(files.contains { !$0.header.is64Bit && $0.header.endian == .little })
    for kind in [ELFFile.Kind.pie, .sharedObject, .executable, .relocatable] {
      #expect(files.contains { $0.kind == kind }, "no \(kind.name) fixture")
    }
  }

  @Test(.enabled(if: haveTool("readelf"), "needs readelf (binutils)"))
  func everyFieldMatchesReadelf() throws {
    let paths = Self.names.map(Fixtures.path)
    let facts = try ReadelfFacts.run(["-h", "-lW", "-n", "-d", "-SW", "-wk"], paths: paths)
    for (name, path) in zip(Self.names, paths) {
      let file = try Self.decode(name)
      let oracle = try #require(facts[path], "readelf printed nothing for \(name)")
      #expect(!oracle.sections.isEmpty && oracle.fileType != nil, "\(name): readelf's output was not understood")
      compare(file, oracle, name: name)
    }
  }

  @Test(.enabled(if: haveTool("llvm-readobj-14"), "needs llvm-readobj-14 (llvm-14)"))
  func headerNotesAndNeededMatchLLVMReadobj() throws {
    let paths = Self.names.map(Fixtures.path)
    let facts = try ReadobjFacts.run(paths: paths)
    // llvm-readobj's `Arch:` names (LLVM triple architectures) for crash tooling's names.
    let llvmNames = ["arm64": "aarch64", "ppc64": "powerpc64", "ppc64le": "powerpc64le", "arm": "arm",
                     "i386": "i386", "x86_64": "x86_64", "mips": "mips", "riscv64": "riscv64"]
    for (name, path) in zip(Self.names, paths) {
      let file = try Self.decode(name)
      let oracle = try #require(facts[path], "llvm-readobj printed nothing for \(name)")
      #expect(llvmNames[file.architecture] == oracle.arch, "\(name): architecture")
      #expect(file.header.is64Bit == oracle.is64Bit, "\(name): class")
      #expect((file.header.endian == .big) == oracle.bigEndian, "\(name): byte order")
      #expect(file.header.machine == oracle.machine, "\(name): e_machine")
      #expect(file.header.type == oracle.elfType, "\(name): e_type")
      #expect(file.buildID?.hex == oracle.buildID, "\(name): build-id")
      #expect(file.needed == oracle.needed, "\(name): DT_NEEDED")
      #expect((file.soname ?? "<Not found>") == oracle.loadName, "\(name): DT_SONAME")
    }
  }

  func compare(_ file: ELFFile, _ oracle: ReadelfFacts, name: String) {
    #expect(file.header.is64Bit == oracle.is64Bit, "\(name): class")
    #expect((file.header.endian == .little) == oracle.littleEndian, "\(name): byte order")
    #expect(file.header.entry == oracle.entry, "\(name): entry")
    let typeNames: [UInt16: String] = [1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"]
    #expect(typeNames[file.header.type] == oracle.fileType, "\(name): e_type")

    // Program headers, field by field.
    #expect(file.programHeaders.count == oracle.segments.count, "\(name): program header count")
    let segmentNames: [UInt32: String] = [1: "LOAD", 2: "DYNAMIC", 3: "INTERP", 4: "NOTE", 6: "PHDR", 7: "TLS",
                                          0x6474_E550: "GNU_EH_FRAME", 0x6474_E551: "GNU_STACK",
                                          0x6474_E552: "GNU_RELRO", 0x6474_E553: "GNU_PROPERTY"]
    for (ours, theirs) in zip(file.programHeaders, oracle.segments) {
      if let typeName = segmentNames[ours.type] { #expect(typeName == theirs.type, "\(name): segment type") }
      #expect(ours.fileOffset == theirs.offset, "\(name): p_offset")
      #expect(ours.vmAddress == theirs.vmAddress, "\(name): p_vaddr")
      #expect(ours.fileSize == theirs.fileSize, "\(name): p_filesz")
      #expect(ours.vmSize == theirs.vmSize, "\(name): p_memsz")
      #expect(ours.alignment == theirs.alignment, "\(name): p_align")
      let flags = (ours.flags & 4 != 0 ? "R" : "") + (ours.flags & 2 != 0 ? "W" : "") + (ours.flags & 1 != 0 ? "E" : "")
      #expect(flags == theirs.flags, "\(name): p_flags")
    }

    // The text and load spans, computed from readelf's segments the way Image defines them.
    let loads = oracle.segments.filter { $0.type == "LOAD" }
    if loads.isEmpty {
      #expect(file.layout == nil, "\(name): no PT_LOAD")
    } else {
      let first = loads.map { $0.alignment > 1 ? $0.vmAddress & ~($0.alignment - 1) : $0.vmAddress }.min() ?? 0
      let textEnd = loads.filter { $0.flags.contains("E") }.map { $0.vmAddress + $0.vmSize }.max() ?? first
      let loadEnd = loads.map { $0.vmAddress + $0.vmSize }.max() ?? first
      #expect(file.textVMRange == first..<max(textEnd, first), "\(name): text range")
      #expect(file.loadVMRange == first..<loadEnd, "\(name): load range")
      #expect(file.summary.textVMRange == file.textVMRange, "\(name): summary text range")
    }
    #expect(file.interpreter == oracle.interpreter, "\(name): PT_INTERP")

    // Sections.
    #expect(file.sections.count == oracle.sections.count, "\(name): section count")
    for (ours, theirs) in zip(file.sections, oracle.sections) {
      #expect(ours.index == theirs.index, "\(name): section index")
      #expect(ours.name == theirs.name, "\(name): section \(theirs.index) name")
      #expect(ours.vmAddress == theirs.address, "\(name): \(theirs.name) sh_addr")
      #expect(ours.fileOffset == theirs.offset, "\(name): \(theirs.name) sh_offset")
      #expect(ours.size == theirs.size, "\(name): \(theirs.name) sh_size")
      #expect(ours.entrySize == theirs.entrySize, "\(name): \(theirs.name) sh_entsize")
      #expect(ours.link == theirs.link, "\(name): \(theirs.name) sh_link")
    }

    // Notes, dynamic section, debug info.
    #expect(file.buildID?.hex == oracle.buildID, "\(name): build-id")
    #expect(file.needed == oracle.needed, "\(name): DT_NEEDED")
    #expect(file.soname == oracle.soname, "\(name): DT_SONAME")
    #expect(file.rpath == oracle.rpath, "\(name): DT_RPATH")
    #expect(file.runpath == oracle.runpath, "\(name): DT_RUNPATH")
    #expect(file.debugInfo.debugLinkFileName == oracle.debugLinkName, "\(name): .gnu_debuglink name")
    #expect(file.debugInfo.debugLinkCRC == oracle.debugLinkCRC, "\(name): .gnu_debuglink CRC")
    let debugInfoSection = oracle.sections.contains { $0.name == ".debug_info" && $0.type != "NOBITS" }
    #expect(file.debugInfo.hasDebugInfo == debugInfoSection, "\(name): .debug_info")
    #expect(file.debugInfo.hasGNUDebugData == oracle.sections.contains { $0.name == ".gnu_debugdata" },
            "\(name): .gnu_debugdata")

    // PIE: ET_DYN with DF_1_PIE; without it a shared object, whatever PT_INTERP and DT_SONAME say.
    if file.header.type == 3 {
      #expect(file.kind == (oracle.pieFlag ? .pie : .sharedObject), "\(name): PIE or shared object")
    }
  }

  @Test func sectionContentsAreSliceable() throws {
    // The symbolication reader builds on `sections` + `contents(of:in:)`: every section with file
    // space must slice, and .dynstr's first byte is the empty string's NUL.
    for name in Self.names {
      let bytes = try Fixtures.bytes(name)
      let file = try Self.decode(name)
      try bytes.withUnsafeBytes { raw in
        let reader = ByteReader(raw)
        for section in file.sections where section.occupiesFile {
          let contents = try file.contents(of: section, in: reader)
          #expect(contents.count == section.fileRange?.count, "\(name): \(section.name)")
        }
        if let dynstr = file.section(named: ".dynstr"), dynstr.occupiesFile {
          #expect(try file.contents(of: dynstr, in: reader).peek(UInt8.self, at: 0) == 0, "\(name): .dynstr")
        }
      }
    }
  }
}

extension ELFFixtureTests {
  @Test func vmAddressesMapToTheirSectionsFileOffsets() throws {
    // Every allocated section with file space, at its sh_addr, maps to its sh_offset through the
    // PT_LOADs: the loader's view and the linker's section view agree.
    for name in Self.names {
      let file = try Self.decode(name)
      guard file.layout != nil else { continue }
      for section in file.sections where section.occupiesFile && section.flags & ELFSection.allocFlag != 0 {
        #expect(file.fileOffset(forVMAddress: section.vmAddress) == section.fileOffset, "\(name): \(section.name)")
      }
    }
  }
}
