/// One compilation unit's `.debug_line` program (DWARF 2–5), run once into rows and sequences, with
/// LLVM's lookup rules: the sequence holding the address, then its last row at or below the address
/// (`DWARFDebugLine::LineTable::lookupAddress`), `is_stmt` not consulted.
final class DWARFLineTable {
  struct Row {
    var address: UInt64
    var line: UInt32
    var column: UInt32
    var file: UInt32
  }

  struct Sequence {
    var lowPC: UInt64
    var highPC: UInt64
    /// Rows `firstRow..<endRow`, the last being the `DW_LNE_end_sequence` row.
    var firstRow: Int
    var endRow: Int
  }

  struct FileEntry {
    var name: String
    var directory: Int
  }

  let version: UInt16
  var directories: [String] = []
  var files: [FileEntry] = []
  private(set) var rows: [Row] = []
  private(set) var sequences: [Sequence] = []
  private var paths: [String?] = []

  /// Where strings of DWARF 5 entries live: the unit's view of `.debug_str`, `.debug_line_str` and
  /// `.debug_str_offsets`.
  struct Strings {
    var str: ByteReader
    var lineStr: ByteReader
    var strOffsets: ByteReader
    var strOffsetsBase: Int?
    var supStr: ByteReader?
  }

  /// Decodes the header and runs the program of the line table at `offset` in `section`.
  init(_ section: ByteReader, offset: Int, strings: Strings) throws(FormatError) {
    let name = ".debug_line"
    var header = section
    try header.seek(to: offset)
    let (count, offsetSize) = try DWARFForm.unitLength(&header, section: name, offset: offset)
    var unit = try section.slice(at: header.offset, length: count)
    let base = header.offset  // unit offsets are relative to here
    version = try unit.read(UInt16.self)
    guard (2...5).contains(version) else {
      throw .dwarf(section: name, offset: offset, "unsupported line table version \(version)")
    }
    if version >= 5 {
      _ = try unit.read(UInt8.self)  // address_size: DW_LNE_set_address's operand length says it again
      _ = try unit.read(UInt8.self)  // segment_selector_size
    }
    let headerLength = try unit.readUnsigned(size: offsetSize)
    guard let headerCount = Int(exactly: headerLength), headerCount <= unit.remaining else {
      throw .dwarf(section: name, offset: offset, "header length \(headerLength) runs past the unit's end")
    }
    let programStart = unit.offset + headerCount  // headerCount <= remaining
    let minimumInstructionLength = UInt64(try unit.read(UInt8.self))
    var maximumOperations: UInt64 = 1
    if version >= 4 {
      maximumOperations = UInt64(try unit.read(UInt8.self))
      if maximumOperations == 0 { maximumOperations = 1 }  // as LLVM: 0 would divide by zero, 1 is the norm
    }
    let defaultIsStmt = try unit.read(UInt8.self) != 0
    let lineBase = Int64(Int8(bitPattern: try unit.read(UInt8.self)))
    let lineRange = UInt64(try unit.read(UInt8.self))
    let opcodeBase = Int(try unit.read(UInt8.self))
    var standardLengths = [UInt8](repeating: 0, count: 256)
    if opcodeBase > 1 {
      for opcode in 1..<opcodeBase { standardLengths[opcode] = try unit.read(UInt8.self) }
    }

    if version >= 5 {
      directories = try Self.entries(&unit, offsetSize: offsetSize, strings: strings, unitOffset: base).map(\.name)
      files = try Self.entries(&unit, offsetSize: offsetSize, strings: strings, unitOffset: base)
    } else {
      while true {
        let directory = try unit.readCString()
        if directory.isEmpty { break }
        directories.append(directory)
      }
      while true {
        let file = try unit.readCString()
        if file.isEmpty { break }
        let directory = try unit.readULEB128()
        try unit.skipLEB128()  // modification time
        try unit.skipLEB128()  // length
        files.append(FileEntry(name: file, directory: Int(clamping: directory)))
      }
    }
    guard unit.offset <= programStart else {
      throw .dwarf(section: name, offset: offset, "file and directory tables run past header_length")
    }
    try unit.seek(to: programStart)

    // The state machine (DWARF 5 section 6.2.2).
    var address: UInt64 = 0
    var operationIndex: UInt64 = 0
    var file: UInt64 = 1
    var line: Int64 = 1
    var column: UInt64 = 0
    var sequenceStart = 0
    var rows: [Row] = []
    rows.reserveCapacity(min(unit.remaining / 2, 1 << 16))
    var sequences: [Sequence] = []

    func advance(_ operationAdvance: UInt64) {
      if maximumOperations == 1 {
        address &+= minimumInstructionLength &* operationAdvance
      } else {
        let total = operationIndex &+ operationAdvance
        address &+= minimumInstructionLength &* (total / maximumOperations)
        operationIndex = total % maximumOperations
      }
    }
    func emit() {
      rows.append(Row(address: address, line: UInt32(truncatingIfNeeded: line), column: UInt32(truncatingIfNeeded: column),
                      file: UInt32(truncatingIfNeeded: file)))
    }

    // Each opcode consumes at least one byte: the loop ends within unit.remaining iterations.
    while unit.remaining > 0 {
      let opcodeOffset = unit.offset
      let opcode = Int(try unit.read(UInt8.self))
      if opcode >= opcodeBase {
        guard lineRange != 0 else {
          throw .dwarf(section: name, offset: base + opcodeOffset, "special opcode with line_range 0")
        }
        let adjusted = UInt64(opcode - opcodeBase)  // opcode >= opcodeBase
        advance(adjusted / lineRange)
        line &+= lineBase &+ Int64(adjusted % lineRange)
        emit()
        continue
      }
      switch opcode {
      case 0:  // extended
        let length = try unit.readULEB128()
        guard let extendedLength = Int(exactly: length), extendedLength <= unit.remaining else {
          throw .dwarf(section: name, offset: base + opcodeOffset, "extended opcode length \(length) runs past the unit's end")
        }
        let end = unit.offset + extendedLength  // extendedLength <= remaining
        guard extendedLength > 0 else { continue }
        let subOpcode = try unit.read(UInt8.self)
        switch subOpcode {
        case 1:  // DW_LNE_end_sequence
          emit()
          let first = sequenceStart
          if rows.count - first >= 2, rows[first].address < address {
            sequences.append(Sequence(lowPC: rows[first].address, highPC: address, firstRow: first, endRow: rows.count))
            sequenceStart = rows.count
          } else {
            rows.removeSubrange(first...)  // an empty or backwards sequence answers nothing, as in LLVM
          }
          address = 0; operationIndex = 0; file = 1; line = 1; column = 0
        case 2:  // DW_LNE_set_address
          let size = extendedLength - 1
          guard size == 1 || size == 2 || size == 4 || size == 8 else {
            throw .dwarf(section: name, offset: base + opcodeOffset, "DW_LNE_set_address with a \(size)-byte operand")
          }
          address = try unit.readUnsigned(size: size)
          operationIndex = 0
        case 3:  // DW_LNE_define_file (DWARF 2–4)
          let fileName = try unit.readCString()
          let directory = try unit.readULEB128()
          files.append(FileEntry(name: fileName, directory: Int(clamping: directory)))
        default:  // DW_LNE_set_discriminator and vendor opcodes: nothing a lookup needs
          break
        }
        try unit.seek(to: end)
      case 1:  // DW_LNS_copy
        emit()
      case 2:  // DW_LNS_advance_pc
        advance(try unit.readULEB128())
      case 3:  // DW_LNS_advance_line
        line &+= try unit.readSLEB128()
      case 4:  // DW_LNS_set_file
        file = try unit.readULEB128()
      case 5:  // DW_LNS_set_column
        column = try unit.readULEB128()
      case 6, 7, 10, 11:  // negate_stmt, set_basic_block, set_prologue_end, set_epilogue_begin
        break
      case 8:  // DW_LNS_const_add_pc
        guard lineRange != 0 else {
          throw .dwarf(section: name, offset: base + opcodeOffset, "DW_LNS_const_add_pc with line_range 0")
        }
        advance(UInt64(255 - opcodeBase) / lineRange)  // opcode < opcodeBase <= 255 here
      case 9:  // DW_LNS_fixed_advance_pc
        address &+= UInt64(try unit.read(UInt16.self))
        operationIndex = 0
      default:  // DW_LNS_set_isa and opcodes this version does not define: skip their ULEB128 operands
        for _ in 0..<standardLengths[opcode] { try unit.skipLEB128() }
      }
    }
    _ = defaultIsStmt
    if sequenceStart < rows.count { rows.removeSubrange(sequenceStart...) }  // no end_sequence: no sequence
    sequences.sort { $0.lowPC < $1.lowPC }
    self.rows = rows
    self.sequences = sequences
    paths = [String?](repeating: nil, count: files.count)
  }

  /// A DWARF 5 directory or file name table: its entry format, then its entries.
  private static func entries(_ unit: inout ByteReader, offsetSize: Int, strings: Strings,
                              unitOffset: Int) throws(FormatError) -> [FileEntry] {
    let formatCount = Int(try unit.read(UInt8.self))
    var format: [(content: UInt64, form: UInt64)] = []
    for _ in 0..<formatCount { format.append((try unit.readULEB128(), try unit.readULEB128())) }
    let count = try unit.readULEB128()
    var result: [FileEntry] = []
    result.reserveCapacity(Int(min(count, UInt64(unit.remaining))))
    var index: UInt64 = 0
    // Each entry must take at least one byte (checked below): the loop ends within unit.remaining rounds.
    while index < count {
      let before = unit.offset
      var entry = FileEntry(name: "", directory: 0)
      for (content, form) in format {
        switch content {
        case 1:  // DW_LNCT_path
          entry.name = try string(&unit, form: form, offsetSize: offsetSize, strings: strings, unitOffset: unitOffset)
        case 2:  // DW_LNCT_directory_index
          entry.directory = Int(clamping: try DWARFForm.constant(&unit, form: form, offset: unitOffset))
        default:  // DW_LNCT_timestamp, DW_LNCT_size, DW_LNCT_MD5, vendor contents
          try DWARFForm.skip(&unit, form: form, addressSize: 8, offsetSize: offsetSize, version: 5)
        }
      }
      guard unit.offset > before else {
        throw .dwarf(section: ".debug_line", offset: unitOffset + before, "\(count) entries of zero bytes")
      }
      result.append(entry)
      index += 1
    }
    return result
  }

  private static func string(_ unit: inout ByteReader, form: UInt64, offsetSize: Int, strings: Strings,
                             unitOffset: Int) throws(FormatError) -> String {
    switch form {
    case DWARFForm.string: return try unit.readCString()
    case DWARFForm.lineStrp: return try strings.lineStr.cString(at: try DWARFForm.sectionOffset(&unit, offsetSize))
    case DWARFForm.strp: return try strings.str.cString(at: try DWARFForm.sectionOffset(&unit, offsetSize))
    case DWARFForm.strpSup, DWARFForm.gnuStrpAlt:
      let offset = try DWARFForm.sectionOffset(&unit, offsetSize)
      guard let sup = strings.supStr else { return "" }
      return try sup.cString(at: offset)
    case DWARFForm.strx, DWARFForm.strx1, DWARFForm.strx2, DWARFForm.strx3, DWARFForm.strx4:
      let index = form == DWARFForm.strx ? try unit.readULEB128() : try unit.readUnsigned(size: Int(form - DWARFForm.strx1) + 1)
      guard let base = strings.strOffsetsBase else {
        throw .dwarf(section: ".debug_line", offset: unitOffset + unit.offset, "DW_FORM_strx without DW_AT_str_offsets_base")
      }
      let offset = try DWARFForm.indexedOffset(strings.strOffsets, base: base, index: index, size: offsetSize,
                                               section: ".debug_str_offsets")
      return try strings.str.cString(at: offset)
    default:
      throw .dwarf(section: ".debug_line", offset: unitOffset + unit.offset, "form 0x\(hexDigits(form)) for a path")
    }
  }

  /// Whether `index` names a file: 0-based in DWARF 5, 1-based before.
  func hasFile(_ index: UInt64) -> Bool {
    version >= 5 ? index < UInt64(files.count) : index >= 1 && index <= UInt64(files.count)
  }

  /// The path of file `index`, joined as gdb and current `llvm-symbolizer` join it: an absolute name
  /// alone; else the compilation directory (unless the include directory is absolute, or is DWARF 5's
  /// directory 0, which *is* the compilation directory), the include directory, the name. `nil` for an
  /// index the table does not have.
  func path(_ index: UInt64, compilationDirectory: String?) -> String? {
    guard hasFile(index) else { return nil }
    let position = Int(index) - (version >= 5 ? 0 : 1)  // hasFile bounds index by files.count
    if let cached = paths[position] { return cached }
    let entry = files[position]
    var result: String
    if entry.name.hasPrefix("/") {
      result = entry.name
    } else {
      var includeDirectory = ""
      if version >= 5 {
        if entry.directory >= 0 && entry.directory < directories.count { includeDirectory = directories[entry.directory] }
      } else if entry.directory > 0 && entry.directory <= directories.count {
        includeDirectory = directories[entry.directory - 1]
      }
      result = ""
      // DWARF 5 (6.2.4.1): directory 0 is the compilation directory itself. LLVM 14, binutils and
      // elfutils prepend the compilation directory to a relative directory 0 again (glibc's
      // "./nptl/./nptl/pthread_create.c", a path that exists nowhere); gdb and later LLVM do not
      // ("./nptl/pthread_create.c", the file in glibc's source tree).
      let isCompilationDirectory = version >= 5 && entry.directory == 0
      if let compilationDirectory, !compilationDirectory.isEmpty, !includeDirectory.hasPrefix("/"),
         !isCompilationDirectory {
        result = compilationDirectory
      }
      Self.append(&result, includeDirectory)
      Self.append(&result, entry.name)
    }
    paths[position] = result
    return result
  }

  /// `llvm::sys::path::append` for one component: one `/` between, none doubled, empty ones skipped.
  static func append(_ path: inout String, _ component: String) {
    guard !component.isEmpty else { return }
    if path.isEmpty { path = component; return }
    if path.hasSuffix("/") {
      path += component.drop { $0 == "/" }
    } else {
      if !component.hasPrefix("/") { path += "/" }
      path += component
    }
  }

  /// The row for `address`: its sequence's last row at or below it; `nil` outside every sequence.
  func row(for address: UInt64) -> Row? {
    rowIndex(for: address).map { rows[$0] }
  }

  /// The index in `rows` of `row(for: address)`.
  func rowIndex(for address: UInt64) -> Int? {
    // Last sequence starting at or below the address.
    var low = 0, high = sequences.count
    while low < high {
      let middle = (low + high) / 2
      if sequences[middle].lowPC <= address { low = middle + 1 } else { high = middle }
    }
    guard low > 0 else { return nil }
    let sequence = sequences[low - 1]
    guard address < sequence.highPC else { return nil }
    // upper_bound over rows[first+1 ..< end-1], minus one: the last row with an address <= `address`.
    var first = sequence.firstRow + 1, last = sequence.endRow - 1
    while first < last {
      let middle = (first + last) / 2
      if rows[middle].address <= address { first = middle + 1 } else { last = middle }
    }
    return first - 1
  }
}
