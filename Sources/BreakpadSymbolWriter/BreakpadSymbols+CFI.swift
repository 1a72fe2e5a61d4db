import ProcessInspection
import ImageReaders
import Symbolication

/// Bytes of a mapped file seen at a link-time address, for the CFI engine (no copy).
struct MappedSectionMemory: MemoryReading {
  let bytes: UnsafeRawBufferPointer
  let address: UInt64

  func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
    let (offset, below) = address.subtractingReportingOverflow(self.address)
    guard !below, offset <= UInt64(bytes.count), UInt64(buffer.count) <= UInt64(bytes.count) - offset else { return false }
    let start = Int(offset)  // offset <= bytes.count
    buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[start..<start + buffer.count]))
    return true
  }
}

/// STACK CFI records from `.debug_frame` and `.eh_frame`, as symbolic's `AsciiCfiWriter` writes them for
/// `dump_syms`: per FDE a `STACK CFI INIT` row with its whole range, then a `STACK CFI` row wherever
/// the CFA rule or a register's rule changes, mentioning only what changed. Register names are
/// Breakpad's for the architecture (`$rsp`, `$rbx`; `x29`, `sp`); the return address column is `.ra`.
///
/// Rules Breakpad's postfix language cannot say are left out, as both Mozilla's and Google's
/// `dump_syms` leave them out: a CFA or register given by a DWARF expression (a PLT's CFA), and
/// `DW_CFA_undefined` (the symbol file format documents `.undef`, but neither dumper writes it, and a
/// stack walker then stops at a missing `.ra` as it would at `.undef`). A row left with nothing to
/// say is not written.
enum BreakpadFrameRules {
  /// The CFI engine's view of `section`.
  static func table(_ section: BreakpadFrameSection) -> CallFrameTable {
    CallFrameTable(memory: MappedSectionMemory(bytes: section.bytes, address: section.vmAddress),
                   address: section.vmAddress, size: UInt64(section.bytes.count),
                   kind: section.isEHFrame ? .ehFrame : .debugFrame, addressSize: section.addressSize)
  }

  /// The FDEs of `section` in section order, with a note when a malformed entry ends them early.
  static func entries(_ section: BreakpadFrameSection) -> (entries: [CallFrameTable.Entry], notes: [String]) {
    let (entries, complete) = table(section).entries()
    guard !complete else { return (entries, []) }
    let name = section.isEHFrame ? ".eh_frame" : ".debug_frame"
    return (entries, ["\(section.path): \(name): a malformed entry ends the call frame entries after \(entries.count)"])
  }

  /// Writes the records of `entries` (FDEs of `section`) to `output` (draining it to `sink` as it
  /// grows); returns notes for FDEs left out.
  static func write(_ entries: ArraySlice<CallFrameTable.Entry>, of section: BreakpadFrameSection, architecture: String,
                    into output: inout UTF8Output, sink: (UnsafeRawBufferPointer) -> Void) -> [String] {
    let names = Registers.breakpadNames(architecture) ?? []
    func name(_ register: Int) -> String? {
      register >= 0 && register < names.count && !names[register].isEmpty ? names[register] : nil
    }
    let table = table(section)
    var notes: [String] = []
    var ruleCache: [CallFrameRule?] = []
    var present: [CallFrameRule?] = []
    var order: [Int] = []  // registers in the order they first got a rule (gimli keeps them so)
    var ordered: [Bool] = []
    for entry in entries {
      guard entry.pcRange.lowerBound != .max, entry.pcRange.lowerBound >= section.loadAddress else { continue }
      guard let rows = table.ruleRows(of: entry), let first = rows.first, let last = rows.last else {
        if !entry.pcRange.isEmpty {
          notes.append("\(section.path): the call frame entry at offset 0x\(hexDigits(entry.offset)) has malformed instructions")
        }
        continue
      }
      let start = first.location
      var cfaCache: CallFrameRow.CFA?
      ruleCache.removeAll(keepingCapacity: true)
      order.removeAll(keepingCapacity: true)
      ordered.removeAll(keepingCapacity: true)
      for row in rows {
        let rowStart = output.count
        var written = false
        if row.location == start {
          output.append("STACK CFI INIT ")
          output.appendHex(start &- section.loadAddress)
          output.append(byte: UInt8(ascii: " "))
          output.appendHex(last.end &- start)
        } else {
          output.append("STACK CFI ")
          output.appendHex(row.location &- section.loadAddress)
        }
        if cfaCache != row.cfa {
          cfaCache = row.cfa
          if case .registerOffset(let register, let offset) = row.cfa, let registerName = name(register) {
            output.append(" .cfa: ")
            output.append(registerName)
            output.append(byte: UInt8(ascii: " "))
            output.appendDecimal(Int(offset))
            output.append(" +")
            written = true
          }
        }
        // The rules in force (an undefined register has none, as in gimli); a register getting its
        // first rule joins the order (the return address first: the CIE gives it before the FDE).
        present.removeAll(keepingCapacity: true)
        var newcomers = 0
        for (register, rule) in row.rules {
          if case .undefined = rule { continue }
          while present.count <= register { present.append(nil) }
          present[register] = rule
          while ruleCache.count <= register { ruleCache.append(nil) }
          while ordered.count <= register { ordered.append(false) }
          if !ordered[register] {
            ordered[register] = true
            if register == row.returnAddressRegister { order.insert(register, at: order.count - newcomers) } else { order.append(register) }
            newcomers += 1
          }
        }
        for register in order {
          guard register < present.count, let rule = present[register], ruleCache[register] != rule else { continue }
          ruleCache[register] = rule
          switch rule {
          case .offset, .valueOffset: break
          case .sameValue: guard name(register) != nil else { continue }
          case .register(let other): guard name(other) != nil else { continue }
          default: continue
          }
          if register == row.returnAddressRegister {
            output.append(" .ra: ")
          } else {
            guard let own = name(register) else { continue }
            output.append(byte: UInt8(ascii: " "))
            output.append(own)
            output.append(": ")
          }
          switch rule {
          case .sameValue: output.append(name(register) ?? "")
          case .offset(let offset):
            output.append(".cfa ")
            output.appendDecimal(Int(offset))
            output.append(" + ^")
          case .valueOffset(let offset):
            output.append(".cfa ")
            output.appendDecimal(Int(offset))
            output.append(" +")
          case .register(let other): output.append(name(other) ?? "")
          default: break
          }
          written = true
        }
        guard written else {
          output.truncate(to: rowStart)
          continue
        }
        output.append(byte: UInt8(ascii: "\n"))
        output.drain(over: 1 << 16, to: sink)
      }
    }
    return notes
  }

}
