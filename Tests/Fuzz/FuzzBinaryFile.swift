// libFuzzer entry for the binary readers, built only by `make fuzz`: compiled in one module with
// Sources/ImageReaders (so no package target is needed) and `-sanitize=fuzzer,address`. It calls the
// same `BinaryFile.parse` as the CLI, then touches what callers touch, the DWARF reader included. Any
// trap, overflow or out-of-bounds access is a finding; thrown `FormatError`s are the expected outcome
// for most inputs.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBinaryFile(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let reader = ByteReader(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
  fuzzCore(reader)
  fuzzBreakpad(reader)
  fuzzMinidump(reader)
  guard let binary = try? BinaryFile.parse(reader) else { return 0 }
  for slice in binary.slices {
    _ = slice.buildID?.uuid
    _ = slice.buildID?.debugID
    _ = slice.textVMRange.upperBound - slice.textVMRange.lowerBound
    _ = slice.loadVMRange.upperBound - slice.loadVMRange.lowerBound
  }
  if case .elf(let file) = binary {
    for section in file.sections { _ = try? file.contents(of: section, in: reader) }
    _ = file.textSize
    fuzzDWARF(file, reader)
  }
  return 0
}

/// The DWARF reader over the file's debug sections (compressed ones refused: no decompressor here),
/// asked for every address where its unit index changes, the addresses next to them, and the middle
/// of each executable section: each unit's DIE tree, line table and names get decoded.
func fuzzDWARF(_ file: ELFFile, _ reader: ByteReader) {
  guard let sections = try? DWARFSections.elf(file, bytes: reader, owner: nil, decompress: nil),
        let dwarf = try? DWARFReader(sections) else { return }
  var probes = dwarf.indexedAddresses.prefix(64).flatMap { [$0, $0 &+ 1, $0 &- 1] }
  for section in file.sections where section.flags & ELFSection.executableFlag != 0 {
    probes += [section.vmAddress, section.vmAddress &+ section.size / 2]
  }
  for address in probes { _ = try? dwarf.frames(at: address) }
  // The symbol cache's table: built from every unit, it must answer as the reader does wherever the
  // reader answers (a difference is a finding, as a trap is).
  if let table = try? DWARFReader(sections).answerTable() {
    for address in probes {
      guard let frames = try? dwarf.frames(at: address) else { continue }
      precondition(table.frames(at: address) == frames, "answer table differs at 0x\(hexDigits(address))")
    }
  }
  fuzzDWARFFunctions(sections)
}
