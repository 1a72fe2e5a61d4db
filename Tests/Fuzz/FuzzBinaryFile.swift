// libFuzzer entry for the binary readers, built only by `make fuzz`: compiled in one module with
// Sources/ImageReaders (so no package target is needed) and `-sanitize=fuzzer,address`. It calls the
// same `BinaryFile.parse` as the CLI, then touches what callers touch. Any trap, overflow or
// out-of-bounds access is a finding; thrown `FormatError`s are the expected outcome for most inputs.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBinaryFile(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
  let reader = ByteReader(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
  guard let binary = try? BinaryFile.parse(reader) else { return 0 }
  for slice in binary.slices {
    _ = slice.buildID?.uuid
    _ = slice.buildID?.debugID
    _ = slice.textVMRange.upperBound - slice.textVMRange.lowerBound
    _ = slice.loadVMRange.upperBound - slice.loadVMRange.lowerBound
  }
  if case .elf(let file) = binary {
    fuzzCallFrames(file, reader)
    for section in file.sections { _ = try? file.contents(of: section, in: reader) }
    _ = file.textSize
  }
  return 0
}
