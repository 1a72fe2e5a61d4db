/// One ELF program header (`ElfN_Phdr`).
public struct ProgramHeader: Sendable, Equatable {
  /// `p_type`: `PT_LOAD` 1, `PT_DYNAMIC` 2, `PT_INTERP` 3, `PT_NOTE` 4, ...
  public var type: UInt32
  /// `p_flags`: `PF_X` 1, `PF_W` 2, `PF_R` 4.
  public var flags: UInt32
  /// `p_offset`
  public var fileOffset: UInt64
  /// `p_vaddr`
  public var vmAddress: UInt64
  /// `p_filesz`
  public var fileSize: UInt64
  /// `p_memsz`
  public var vmSize: UInt64
  /// `p_align`
  public var alignment: UInt64

  /// `PT_LOAD`
  package static let load: UInt32 = 1
  /// `PT_DYNAMIC`
  package static let dynamic: UInt32 = 2
  /// `PT_INTERP`
  package static let interpreter: UInt32 = 3
  /// `PT_NOTE`
  package static let note: UInt32 = 4
  /// `PT_PHDR`
  package static let programHeaderTable: UInt32 = 6
  /// `PF_X`
  package static let executable: UInt32 = 1

  /// Decodes one program header at the reader's current offset (the layout differs by class).
  package init(_ reader: inout ByteReader, is64Bit: Bool) throws(FormatError) {
    type = try reader.read(UInt32.self)
    if is64Bit {
      flags = try reader.read(UInt32.self)
      fileOffset = try reader.read(UInt64.self)
      vmAddress = try reader.read(UInt64.self)
      _ = try reader.read(UInt64.self)  // p_paddr
      fileSize = try reader.read(UInt64.self)
      vmSize = try reader.read(UInt64.self)
      alignment = try reader.read(UInt64.self)
    } else {
      fileOffset = UInt64(try reader.read(UInt32.self))
      vmAddress = UInt64(try reader.read(UInt32.self))
      _ = try reader.read(UInt32.self)  // p_paddr
      fileSize = UInt64(try reader.read(UInt32.self))
      vmSize = UInt64(try reader.read(UInt32.self))
      flags = try reader.read(UInt32.self)
      alignment = UInt64(try reader.read(UInt32.self))
    }
  }

  /// Decodes the program header at `position` in `table`: one bounds check for the whole entry
  /// (56 bytes, 32 for ELFCLASS32), then its fields.
  init(_ table: ByteReader, at position: Int, is64Bit: Bool) throws(FormatError) {
    let size = is64Bit ? 56 : 32
    guard position >= 0, position <= table.count, size <= table.count - position else {
      throw .outOfRange(start: position, length: size, limit: table.count)
    }
    // The entry's `size` bytes are inside `table`: every field below lies in them, and no offset
    // below can overflow (position <= table.count - size).
    type = table.field(UInt32.self, at: position)
    if is64Bit {
      flags = table.field(UInt32.self, at: position &+ 4)
      fileOffset = table.field(UInt64.self, at: position &+ 8)
      vmAddress = table.field(UInt64.self, at: position &+ 16)
      fileSize = table.field(UInt64.self, at: position &+ 32)  // p_paddr at 24 is not kept
      vmSize = table.field(UInt64.self, at: position &+ 40)
      alignment = table.field(UInt64.self, at: position &+ 48)
    } else {
      fileOffset = UInt64(table.field(UInt32.self, at: position &+ 4))
      vmAddress = UInt64(table.field(UInt32.self, at: position &+ 8))
      fileSize = UInt64(table.field(UInt32.self, at: position &+ 16))  // p_paddr at 12 is not kept
      vmSize = UInt64(table.field(UInt32.self, at: position &+ 20))
      flags = table.field(UInt32.self, at: position &+ 24)
      alignment = UInt64(table.field(UInt32.self, at: position &+ 28))
    }
  }

  /// A program header with the given fields (in-memory headers, tests).
  package init(type: UInt32, flags: UInt32, fileOffset: UInt64, vmAddress: UInt64,
              fileSize: UInt64, vmSize: UInt64, alignment: UInt64) {
    self.type = type; self.flags = flags; self.fileOffset = fileOffset; self.vmAddress = vmAddress
    self.fileSize = fileSize; self.vmSize = vmSize; self.alignment = alignment
  }

  /// Decodes `count` program headers of `entrySize` bytes each from `table`.
  /// The count is bounded by the table's size, so a lying `e_phnum` cannot drive allocation.
  package static func table(_ table: ByteReader, count: Int, entrySize: Int,
                           is64Bit: Bool) throws(FormatError) -> [ProgramHeader] {
    let expected = is64Bit ? 56 : 32
    guard entrySize >= expected else {
      throw .elf("e_phentsize \(entrySize) is smaller than \(expected), the ELF class's program header")
    }
    var result: [ProgramHeader] = []
    result.reserveCapacity(min(count, table.count / entrySize))
    for index in 0..<count {
      // index < count and entrySize <= 65535, and count is UInt16 or bounded by the table's bytes by
      // the caller (PN_XNUM): the product fits in Int.
      let start = index * entrySize
      guard start <= table.count, entrySize <= table.count - start else {  // as `table.slice(at:length:)` checks
        throw .outOfRange(start: start, length: entrySize, limit: table.count)
      }
      result.append(try ProgramHeader(table, at: start, is64Bit: is64Bit))
    }
    return result
  }
}

/// The spans an image covers once loaded, computed from its program headers the same way in
/// process, in another process, and from a file, so the three always agree.
public struct LoadLayout: Sendable, Equatable {
  /// The lowest `PT_LOAD` `p_vaddr`, rounded down to its page alignment: where the ELF header maps.
  public var firstVMAddress: UInt64
  /// The end of the last executable `PT_LOAD` (`p_vaddr + p_memsz`), relative to link addresses.
  public var textEndVMAddress: UInt64
  /// The end of the last `PT_LOAD` of any kind (`p_vaddr + p_memsz`).
  public var loadEndVMAddress: UInt64

  /// The layout of `headers`, or `nil` when there is no `PT_LOAD`. Sums are checked: a segment whose
  /// end overflows throws.
  package init?(_ headers: [ProgramHeader]) throws(FormatError) {
    var first: UInt64?
    var textEnd: UInt64 = 0
    var loadEnd: UInt64 = 0
    for header in headers where header.type == ProgramHeader.load {
      let (end, overflow) = header.vmAddress.addingReportingOverflow(header.vmSize)
      guard !overflow else {
        throw .elf("PT_LOAD at 0x\(hexDigits(header.vmAddress)) with size 0x\(hexDigits(header.vmSize)) overflows")
      }
      let alignment = header.alignment > 1 && header.alignment & (header.alignment - 1) == 0 ? header.alignment : 1
      let start = header.vmAddress & ~(alignment - 1)
      first = min(first ?? start, start)
      loadEnd = max(loadEnd, end)
      if header.flags & ProgramHeader.executable != 0 { textEnd = max(textEnd, end) }
    }
    guard let first else { return nil }
    firstVMAddress = first
    textEndVMAddress = max(textEnd, first)
    loadEndVMAddress = loadEnd
  }
}
