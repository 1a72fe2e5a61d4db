/// The minidump reader over the same input (most inputs are not minidumps and stop at the signature;
/// the minidump seeds get past it): every stream, then what a report reads from it — each thread's
/// stack and the memory its registers point at, each module's identifiers, the Linux and Crashpad
/// streams. A minidump input is also made into the hostile shapes of issue 35 (MinidumpShapes: many
/// threads over one stack, over overlapping ranges, many modules) and read the same way.
func fuzzMinidump(_ reader: ByteReader) {
  guard let dump = try? MinidumpFile(source: reader) else { return }
  exerciseMinidump(dump, reader)
  let bytes = (try? reader.bytes(at: 0, length: reader.count)) ?? []
  // By the input: one range at one address, one range at many addresses, or overlapping ranges of the
  // file at many addresses.
  let shift = bytes.count % 3 == 2 ? bytes.count % 7 + 1 : 0
  guard let shaped = MinidumpShapes.replicating(bytes, threads: 300, modules: 300, stackSize: 16 << 10, stackShift: shift,
                                                stackAddressStep: bytes.count % 3 == 0 ? 0 : 16 << 10)
  else { return }
  shaped.withUnsafeBytes { raw in
    let source = ByteReader(raw)
    guard let dump = try? MinidumpFile(source: source) else { return }
    exerciseMinidump(dump, source)
  }
}

func exerciseMinidump(_ dump: MinidumpFile, _ reader: ByteReader) {
  for thread in dump.threads {
    _ = try? dump.stack(of: thread, in: reader)
    for value in thread.context?.values ?? [] {
      _ = try? dump.memory(at: value, length: 32, in: reader)
      _ = dump.availableBytes(from: value)
    }
  }
  // The stacks as a snapshot holds them: a range of the file once, and no more than the file in all.
  let held = MinidumpShapes.heldBytes(dump.stackCopies(in: reader).stacks.map { $0?.bytes })
  if held.distinct > reader.count { fatalError("stack copies hold \(held.distinct) bytes of a \(reader.count)-byte dump") }
  for module in dump.modules { _ = (module.debugIdentifier, module.codeIdentifier(platformID: dump.systemInfo?.platformID), module.debugFileName, module.addressRange) }
  for range in dump.memoryRanges { _ = dump.fileRange(ofMemory: range.address, length: Int(min(range.size, 64))) }
  _ = (dump.linux.arguments, dump.linux.environmentEntries, dump.linux.procStatusValue("Pid"))
  _ = (dump.crashpadInfo?.reportIDString, dump.systemInfo?.x86VendorID, dump.systemInfo?.armCPUID, dump.exception?.context?.sp)
  _ = (dump.exception?.reason(dump.systemInfo), dump.exception?.crashAddress(dump.systemInfo), dump.systemInfo?.osVersionText)
}
