// libFuzzer pieces for the Breakpad symbol file reader and the DWARF function walk that symbol files are
// written from, called by FuzzBinaryFile.swift's entry point on every input.

/// The `.sym` reader over the input as text, then every lookup at each record's addresses.
func fuzzBreakpad(_ reader: ByteReader) {
  fuzzWindowsFrames(reader)
  for reading in [BreakpadSymbolFile.Reading.everything, .onDemand] {
    guard let file = try? BreakpadSymbolFile(reader, reading: reading) else { continue }
    fuzzLookups(file)
  }
}

/// Every lookup at each record's addresses (on demand, these read the records skipped at first).
private func fuzzLookups(_ file: BreakpadSymbolFile) {
  var probes: [UInt64] = [0, .max]
  for function in file.functions.prefix(256) { probes += [function.address, function.address &+ function.size / 2] }
  for symbol in file.publics.prefix(64) { probes.append(symbol.address &+ 1) }
  for entry in file.frameEntries.prefix(64) { probes.append(entry.address &+ entry.size / 2) }
  for address in probes {
    _ = file.frames(at: address)
    _ = file.frameRules(at: address)
  }
}

/// The `STACK WIN` records of the input, each walked from made-up registers over made-up stack words
/// (frame data programs and FPO, with and without a grand-callee).
func fuzzWindowsFrames(_ reader: ByteReader) {
  guard let frames = try? BreakpadWindowsFrames(reader) else { return }
  let callee = BreakpadWindowsFrames.Registers(eip: 0x40_1000, esp: 0x0012_FF00, ebp: 0x0012_FF40, ebx: 1)
  for record in frames.records.prefix(64) {
    _ = frames.record(covering: record.address &+ record.size / 2)
    for grandCallee in [0, record.parameterSize, .max] {
      _ = BreakpadWindowsFrames.caller(of: callee, by: record, grandCalleeParameterSize: grandCallee, hasGrandCallee: grandCallee != 0,
                                       read: { $0 & 3 == 0 ? UInt32(truncatingIfNeeded: $0 &* 0x9E37_79B9) : nil })
    }
  }
}

/// Every unit's functions, line rows and names, as `imagelog symbols` walks them.
func fuzzDWARFFunctions(_ sections: DWARFSections) {
  guard let dwarf = try? DWARFReader(sections, indexed: false) else { return }
  for unit in 0..<min(dwarf.unitCount, 64) {
    guard let found = try? dwarf.functions(inUnit: unit) else { continue }
    let rows = try? dwarf.lineRows(inUnit: unit)
    for function in found.functions.prefix(64) {
      _ = try? dwarf.declaredName(of: function.nameSource)
      for range in function.ranges { _ = rows?.rows(covering: range) }
      for call in function.inlinedCalls.prefix(64) {
        _ = try? dwarf.declaredName(of: call.nameSource)
        _ = try? dwarf.filePath(inUnit: unit, file: call.callFile ?? 0)
      }
    }
  }
}
