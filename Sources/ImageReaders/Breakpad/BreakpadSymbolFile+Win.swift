/// A symbol file's `STACK WIN` records (32-bit x86 Windows: what a PDB's FPO and frame data say), and
/// the walk from a callee's registers to its caller's that they describe, as Breakpad's processor
/// (`windows_frame_info.h`, `stackwalker_x86.cc`) and rust-minidump's `breakpad-symbols`
/// (`sym_file/walker.rs`, which minidump-stackwalk runs) evaluate them.
///
/// `STACK WIN type address code_size prologue_size epilogue_size parameter_size saved_register_size
/// local_size max_stack_size has_program_string program_string_or_allocates_base_pointer`, numbers in
/// hex. Type 4 (frame data) carries a postfix program; type 0 (FPO) says whether the function uses
/// `ebp` as a general register. Records are kept as rust-minidump keeps them, so a lookup finds the
/// record it finds: other types, a zero or overflowing size, and a type that disagrees with its
/// `has_program_string` are left out; each type is a list of its own, where a record overlapping the
/// one before it in the file either shortens that one (it starts later: the earlier one's size covered
/// the whole function) or is left out; then, in address order, a record overlapping one already kept
/// is left out. Frame data is looked up first, FPO second.
///
/// The file is read on its own pass (only a module that has these records needs it): strict on a
/// record's fields (an error naming the line), tolerant on everything else.
package struct BreakpadWindowsFrames: Sendable {
  /// One `STACK WIN` record.
  package struct Record: Sendable, Equatable {
    package var address: UInt64
    package var size: UInt64
    package var prologueSize: UInt32
    package var epilogueSize: UInt32
    package var parameterSize: UInt32
    package var savedRegisterSize: UInt32
    package var localSize: UInt32
    package var maxStackSize: UInt32
    /// Frame data's postfix program (type 4); `nil` for FPO (type 0).
    package var program: String?
    /// FPO: the function saved the caller's `ebp` (it uses the register for itself).
    package var allocatesBasePointer: Bool

    package init(address: UInt64, size: UInt64, prologueSize: UInt32 = 0, epilogueSize: UInt32 = 0, parameterSize: UInt32 = 0,
                 savedRegisterSize: UInt32 = 0, localSize: UInt32 = 0, maxStackSize: UInt32 = 0, program: String? = nil,
                 allocatesBasePointer: Bool = false) {
      self.address = address
      self.size = size
      self.prologueSize = prologueSize
      self.epilogueSize = epilogueSize
      self.parameterSize = parameterSize
      self.savedRegisterSize = savedRegisterSize
      self.localSize = localSize
      self.maxStackSize = maxStackSize
      self.program = program
      self.allocatesBasePointer = allocatesBasePointer
    }

    /// The last address the record covers, `nil` for a zero size or one past the address space.
    var lastAddress: UInt64? {
      guard size > 0 else { return nil }
      let (end, overflow) = address.addingReportingOverflow(size)
      return overflow ? nil : end - 1  // end > address >= 0
    }
  }

  /// A kept record and the addresses it answers for (first...last).
  struct Entry: Sendable {
    var first: UInt64
    var last: UInt64
    var record: Record
  }

  /// Frame data (type 4) and FPO (type 0) records, each sorted by address, none overlapping another.
  private(set) var frameData: [Entry] = []
  private(set) var fpo: [Entry] = []
  /// Records left out and why, one line each naming the line; at most `BreakpadSymbolFile.noteLimit`.
  package private(set) var notes: [String] = []

  /// The records kept, frame data then FPO.
  package var records: [Record] { (frameData + fpo).map(\.record) }

  /// A table of `records` (each list in file order), kept as a file's would be.
  package init(records: [Record]) {
    var data: [Record] = [], fpo: [Record] = []
    for record in records {
      if record.program != nil { Self.insert(record, into: &data, line: 0, notes: &notes) } else {
        Self.insert(record, into: &fpo, line: 0, notes: &notes)
      }
    }
    frameData = Self.kept(data)
    self.fpo = Self.kept(fpo)
  }

  /// Reads the `STACK WIN` records of the symbol file in `bytes`. Throws `FormatError.breakpad` naming
  /// the line for a record whose fields break the format.
  package init(_ bytes: ByteReader) throws(FormatError) {
    try self.init(bytes, lines: nil)
  }

  /// The `STACK WIN` records of `symbols`, read from the bytes it holds when it was read on demand: only
  /// the lines its reader saw them on, not a second pass over the whole file. `nil` when it holds no
  /// bytes (read whole: read the file with `init(_:)`).
  package init?(in symbols: BreakpadSymbolFile) throws(FormatError) {
    guard let lines = symbols.windowsFrameLines else {
      self.init(records: [])
      return
    }
    guard symbols.holdsItsBytes else { return nil }
    var failure: FormatError?
    let read = symbols.withFileBytes { raw -> Self? in
      guard lines.bytes.upperBound <= raw.count else { return nil }
      do throws(FormatError) { return try Self(ByteReader(raw), lines: lines) } catch { failure = error; return nil }
    }
    if let failure { throw failure }
    guard let read = read ?? nil else { return nil }
    self = read
  }

  /// Reads the records in `lines` of `bytes` (all of them when `nil`), numbering lines from its first.
  private init(_ bytes: ByteReader, lines: (bytes: Range<Int>, firstLine: Int)?) throws(FormatError) {
    var data: [Record] = [], fpo: [Record] = []
    var notes: [String] = []
    try bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(FormatError) in
      var position = lines?.bytes.lowerBound ?? 0, number = (lines?.firstLine ?? 1) - 1
      let limit = min(lines?.bytes.upperBound ?? raw.count, raw.count)
      // Each round consumes a line (at least its `\n`, or the rest of the bytes): bounded by the size.
      while position < limit {
        var end = BreakpadSymbolFile.Parser.lineEnd(raw, position, limit)
        let next = end + 1
        if end > position, raw[end - 1] == 0x0D { end -= 1 }  // CR LF
        number += 1
        defer { position = next }
        guard end - position > 10, Self.startsWithStackWin(raw, position) else { continue }
        guard let record = try Self.record(raw, position + 10, end, line: number, notes: &notes) else { continue }
        if record.program != nil { Self.insert(record, into: &data, line: number, notes: &notes) } else {
          Self.insert(record, into: &fpo, line: number, notes: &notes)
        }
      }
    }
    frameData = Self.kept(data)
    self.fpo = Self.kept(fpo)
    self.notes = notes
  }

  /// The record covering `address` (an offset from the module's base): frame data first, as
  /// rust-minidump prefers it; `nil` when none does.
  package func record(covering address: UInt64) -> Record? {
    Self.entry(frameData, covering: address) ?? Self.entry(fpo, covering: address)
  }

  static func entry(_ entries: [Entry], covering address: UInt64) -> Record? {
    var low = 0, high = entries.count
    while low < high {
      let middle = low + (high - low) / 2
      if entries[middle].first <= address { low = middle + 1 } else { high = middle }
    }
    guard low > 0, address <= entries[low - 1].last else { return nil }
    return entries[low - 1].record
  }

  // MARK: Reading

  static let stackWin: [UInt8] = Array("STACK WIN ".utf8)

  static func startsWithStackWin(_ raw: UnsafeRawBufferPointer, _ position: Int) -> Bool {
    // The caller checked that 10 bytes follow `position`.
    for (offset, byte) in stackWin.enumerated() where raw[position + offset] != byte { return false }
    return true
  }

  /// The fields after `STACK WIN `; `nil` for a record left out (noted).
  static func record(_ raw: UnsafeRawBufferPointer, _ start: Int, _ end: Int, line: Int,
                     notes: inout [String]) throws(FormatError) -> Record? {
    var position = start
    func field(_ name: String) throws(FormatError) -> Range<Int> {
      while position < end, raw[position] == 0x20 { position += 1 }
      let first = position
      while position < end, raw[position] != 0x20 { position += 1 }
      guard position > first else { throw .breakpad(line: line, "STACK WIN has no \(name)") }
      return first..<position
    }
    func text(_ range: Range<Int>) -> String { String(decoding: UnsafeRawBufferPointer(rebasing: raw[range]), as: UTF8.self) }
    func hex(_ name: String, digits: Int) throws(FormatError) -> UInt64 {
      let range = try field(name)
      guard range.count <= digits else {
        throw .breakpad(line: line, "STACK WIN \(name) \"\(text(range))\" has more than \(digits) hex digits")
      }
      var value: UInt64 = 0
      for index in range {
        let byte = raw[index]
        let digit: UInt64
        switch byte {
        case 0x30...0x39: digit = UInt64(byte - 0x30)
        case 0x61...0x66: digit = UInt64(byte - 0x61 + 10)
        case 0x41...0x46: digit = UInt64(byte - 0x41 + 10)
        default: throw .breakpad(line: line, "STACK WIN \(name) \"\(text(range))\" is not hex")
        }
        value = value << 4 | digit  // at most 16 digits: no bits lost
      }
      return value
    }
    func hex32(_ name: String) throws(FormatError) -> UInt32 {
      UInt32(truncatingIfNeeded: try hex(name, digits: 8))  // at most 8 digits: exact
    }
    let type = try hex("type", digits: 1)
    let address = try hex("address", digits: 16)
    let size = try hex32("code size")
    let prologue = try hex32("prologue size")
    let epilogue = try hex32("epilogue size")
    let parameters = try hex32("parameter size")
    let savedRegisters = try hex32("saved register size")
    let locals = try hex32("local size")
    let maxStack = try hex32("max stack size")
    let hasProgramField = try field("has_program_string")
    guard hasProgramField.count == 1, raw[hasProgramField.lowerBound] >= 0x30, raw[hasProgramField.lowerBound] <= 0x39 else {
      throw .breakpad(line: line, "STACK WIN has_program_string \"\(text(hasProgramField))\" is not a digit")
    }
    if position < end { position += 1 }  // the one space before the rest
    let rest = text(position..<end)
    let hasProgram = raw[hasProgramField.lowerBound] == 0x31
    guard type == 4 || type == 0 else {
      note(&notes, line, "STACK WIN type \(type) is not frame data (4) or FPO (0): ignored")
      return nil
    }
    guard (type == 4) == hasProgram else {
      note(&notes, line, "STACK WIN type \(type) disagrees with has_program_string \(hasProgram ? 1 : 0): ignored")
      return nil
    }
    return Record(address: address, size: UInt64(size), prologueSize: prologue, epilogueSize: epilogue,
                  parameterSize: parameters, savedRegisterSize: savedRegisters, localSize: locals, maxStackSize: maxStack,
                  program: hasProgram ? rest : nil, allocatesBasePointer: !hasProgram && rest == "1")
  }

  static func note(_ notes: inout [String], _ line: Int, _ text: String) {
    if notes.count < BreakpadSymbolFile.noteLimit { notes.append(line > 0 ? "line \(line): \(text)" : text) }
  }

  /// Appends `record` to its type's list as rust-minidump does: a record overlapping the last one
  /// either ends that one where it starts (it starts later) or, with another range, is left out.
  static func insert(_ record: Record, into list: inout [Record], line: Int, notes: inout [String]) {
    guard let last = record.lastAddress else {
      note(&notes, line, "STACK WIN at \(hexDigits(record.address)) has an empty or overflowing range: ignored")
      return
    }
    if let previous = list.last, let previousLast = previous.lastAddress,
       record.address <= previousLast, previous.address <= last {
      if record.address > previous.address {
        list[list.count - 1].size = record.address - previous.address
      } else if previous.address != record.address || previousLast != last {
        note(&notes, line, "STACK WIN at \(hexDigits(record.address)) overlaps the one before it: ignored")
        return
      }
    }
    list.append(record)
  }

  /// The records in address order with none overlapping another (rust-minidump's `into_rangemap_safe`):
  /// one that starts inside a kept one is left out, unless it is the same record (then they join).
  static func kept(_ list: [Record]) -> [Entry] {
    var sorted: [Entry] = []
    sorted.reserveCapacity(list.count)
    for record in list {
      if let last = record.lastAddress { sorted.append(Entry(first: record.address, last: last, record: record)) }
    }
    // A file's records are mostly in address order already: sorted (stably) only when they are not.
    if sorted.indices.dropFirst().contains(where: { (sorted[$0].first, sorted[$0].last) < (sorted[$0 - 1].first, sorted[$0 - 1].last) }) {
      sorted = sorted.enumerated()
        .sorted { ($0.element.first, $0.element.last, $0.offset) < ($1.element.first, $1.element.last, $1.offset) }.map(\.element)
    }
    // Those kept moved to the front, in place: `sorted[..<kept]`.
    var kept = 0
    for index in sorted.indices {
      let entry = sorted[index]
      if kept > 0 {
        let previous = sorted[kept - 1]
        if entry.first <= previous.last, entry.record != previous.record { continue }
        let (next, overflow) = previous.last.addingReportingOverflow(1)
        if entry.first <= (overflow ? previous.last : next), entry.record == previous.record {
          sorted[kept - 1].last = max(previous.last, entry.last)
          continue
        }
      }
      sorted[kept] = entry  // kept <= index
      kept += 1
    }
    sorted.removeSubrange(kept...)
    return sorted
  }
}

// MARK: Walking

extension BreakpadWindowsFrames {
  /// The x86 registers a `STACK WIN` walk reads and sets; `nil`: not known.
  package struct Registers: Sendable, Equatable {
    package var eip: UInt32?
    package var esp: UInt32?
    package var ebp: UInt32?
    package var ebx: UInt32?
    package var esi: UInt32?
    package var edi: UInt32?

    package init(eip: UInt32? = nil, esp: UInt32? = nil, ebp: UInt32? = nil, ebx: UInt32? = nil, esi: UInt32? = nil,
                 edi: UInt32? = nil) {
      self.eip = eip
      self.esp = esp
      self.ebp = ebp
      self.ebx = ebx
      self.esi = esi
      self.edi = edi
    }
  }

  /// The most tokens a program may have (Breakpad's own are about 25): a longer one is not run.
  package static let maximumTokens = 1024

  /// The caller's registers by `record`, from the callee's: the frame data program run, or FPO's
  /// fixed rule, as rust-minidump runs them (`walk_with_stack_win_framedata`, `walk_with_stack_win_fpo`).
  /// `grandCalleeParameterSize` is the parameter size of the function the callee called (its stack
  /// arguments are still on the callee's frame; 0 for frame 0); `read` reads 4 stack bytes. Only the
  /// registers the record gives are known in the result; `nil` when the program fails (a token it
  /// does not know, too few operands, an unknown variable, a division by zero, unreadable memory, a
  /// value past 32 bits, more than `maximumTokens`).
  package static func caller(of callee: Registers, by record: Record, grandCalleeParameterSize: UInt32,
                             hasGrandCallee: Bool, read: (UInt64) -> UInt32?) -> Registers? {
    if let program = record.program {
      return run(program, record: record, callee: callee, grandCalleeParameterSize: grandCalleeParameterSize, read: read)
    }
    guard let esp = callee.esp, let eip = callee.eip else { return nil }
    // local + saved + grand-callee parameters, each 32 bits: their sum fits 64 bits; rust-minidump adds
    // them in 32 bits (wrapping in its release build), so the sum wraps as it does.
    let frameSize = record.localSize &+ record.savedRegisterSize &+ grandCalleeParameterSize
    var eipAddress = UInt64(esp) + UInt64(frameSize)  // two 32-bit values: no overflow
    guard var callerEIP = read(eipAddress) else { return nil }
    // Breakpad: a frame-pointer-omitting system call can leave its return address on the stack; in
    // frame 0 (no grand-callee) a "caller" at the callee's own pc is that word, and the real one follows.
    if !hasGrandCallee, callerEIP == eip {
      eipAddress += 4
      guard let next = read(eipAddress) else { return nil }
      callerEIP = next
    }
    guard let callerESP = UInt32(exactly: eipAddress + 4) else { return nil }  // eipAddress < 2^33
    var caller = Registers(eip: callerEIP, esp: callerESP)
    if record.allocatesBasePointer {
      // Where the FPO function saved the caller's ebp: below its saved registers.
      let (address, below) = (UInt64(esp) + UInt64(grandCalleeParameterSize) + UInt64(record.savedRegisterSize))
        .subtractingReportingOverflow(8)  // three 32-bit values: the sum cannot overflow
      guard !below, let ebp = read(address) else { return nil }
      caller.ebp = ebp
    } else {
      // Breakpad keeps ebx too: simple forwarding functions in ntdll leave it alone, and the walk of
      // their callers may need it.
      guard let ebp = callee.ebp else { return nil }
      caller.ebp = ebp
      caller.ebx = callee.ebx
    }
    return caller
  }

  /// A value on the program's stack: a number, a variable's name, or `.undef`.
  enum Value {
    case number(UInt32)
    case variable(Substring)
    case undefined
  }

  /// Runs a frame data program: postfix tokens over 32-bit values and variables (`$eip`, `$T0`,
  /// `.raSearch`), `=` assigning. The variables start as the callee's `$esp`, `$ebp` (both needed) and
  /// `$ebx` (when known), with `.cbParams`, `.cbCalleeParams`, `.cbSavedRegs`, `.cbLocals` from the
  /// record and `.raSearch`/`.raSearchStart` where the return address is: `$esp` plus the frame's
  /// size, or `$ebp + 4` when the program aligns the stack (`@`: `$esp` cannot be trusted). The caller's
  /// registers are the variables `$eip $esp $ebp $ebx $esi $edi` at the end.
  static func run(_ program: String, record: Record, callee: Registers, grandCalleeParameterSize: UInt32,
                  read: (UInt64) -> UInt32?) -> Registers? {
    guard let esp = callee.esp, let ebp = callee.ebp else { return nil }
    let frameSize = record.localSize &+ record.savedRegisterSize &+ grandCalleeParameterSize  // as rust-minidump: 32-bit, wrapping
    let searchStart: UInt32
    if program.utf8.contains(UInt8(ascii: "@")) {
      guard case (let value, false) = ebp.addingReportingOverflow(4) else { return nil }
      searchStart = value
    } else {
      guard case (let value, false) = esp.addingReportingOverflow(frameSize) else { return nil }
      searchStart = value
    }
    var variables: [Substring: UInt32] = [
      "$esp": esp, "$ebp": ebp, ".cbParams": record.parameterSize, ".cbCalleeParams": grandCalleeParameterSize,
      ".cbSavedRegs": record.savedRegisterSize, ".cbLocals": record.localSize, ".raSearch": searchStart,
      ".raSearchStart": searchStart,
    ]
    if let ebx = callee.ebx { variables["$ebx"] = ebx }
    // Some Windows toolchains write `=NAME` for `= NAME`: split, as rust-minidump does.
    var tokens: [Substring] = []
    for token in program.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
      if token.count > 1, token.first == "=" {
        tokens.append(token.prefix(1))
        tokens.append(token.dropFirst())
      } else {
        tokens.append(token)
      }
      guard tokens.count <= maximumTokens else { return nil }
    }
    var stack: [Value] = []
    func integer(_ value: Value) -> UInt32? {
      switch value {
      case .number(let number): number
      case .variable(let name): variables[name]
      case .undefined: nil
      }
    }
    func operands() -> (UInt32, UInt32)? {
      guard let right = stack.popLast().flatMap(integer), let left = stack.popLast().flatMap(integer) else { return nil }
      return (left, right)
    }
    for token in tokens {
      switch token {
      case "+":
        guard let (left, right) = operands() else { return nil }
        stack.append(.number(left &+ right))
      case "-":
        guard let (left, right) = operands() else { return nil }
        stack.append(.number(left &- right))
      case "*":
        guard let (left, right) = operands() else { return nil }
        stack.append(.number(left &* right))
      case "/":
        guard let (left, right) = operands(), right != 0 else { return nil }
        stack.append(.number(left / right))
      case "%":
        guard let (left, right) = operands(), right != 0 else { return nil }
        stack.append(.number(left % right))
      case "@":
        // Align down to a power of two.
        guard let (left, right) = operands(), right != 0, right & (right - 1) == 0 else { return nil }
        stack.append(.number(left & ~(right - 1)))
      case "=":
        guard let value = stack.popLast(), case .variable(let name)? = stack.popLast() else { return nil }
        if case .undefined = value {
          variables[name] = nil
        } else {
          guard let number = integer(value) else { return nil }
          variables[name] = number
        }
      case "^":
        guard let address = stack.popLast().flatMap(integer), let value = read(UInt64(address)) else { return nil }
        stack.append(.number(value))
      case ".undef":
        stack.append(.undefined)
      default:
        if token.first == "$" || token.first == "." {
          stack.append(.variable(token))
        } else if let value = Int32(token) {
          stack.append(.number(UInt32(bitPattern: value)))
        } else {
          return nil
        }
      }
    }
    return Registers(eip: variables["$eip"], esp: variables["$esp"], ebp: variables["$ebp"], ebx: variables["$ebx"],
                     esi: variables["$esi"], edi: variables["$edi"])
  }
}
