/// The minidump reader over the same input (most inputs are not minidumps and stop at the signature;
/// the minidump seeds get past it): every stream, then what a report reads from it — each thread's
/// stack and the memory its registers point at, each module's identifiers, the Linux and Crashpad
/// streams.
func fuzzMinidump(_ reader: ByteReader) {
  guard let dump = try? MinidumpFile(source: reader) else { return }
  for thread in dump.threads {
    _ = try? dump.stack(of: thread, in: reader)
    for value in thread.context?.values ?? [] {
      _ = try? dump.memory(at: value, length: 32, in: reader)
      _ = dump.availableBytes(from: value)
    }
  }
  for module in dump.modules { _ = (module.debugIdentifier, module.codeIdentifier(platformID: dump.systemInfo?.platformID), module.debugFileName, module.addressRange) }
  for range in dump.memoryRanges { _ = dump.fileRange(ofMemory: range.address, length: Int(min(range.size, 64))) }
  _ = (dump.linux.arguments, dump.linux.environmentEntries, dump.linux.procStatusValue("Pid"))
  _ = (dump.crashpadInfo?.reportIDString, dump.systemInfo?.x86VendorID, dump.systemInfo?.armCPUID, dump.exception?.context?.sp)
  _ = (dump.exception?.reason(dump.systemInfo), dump.exception?.crashAddress(dump.systemInfo), dump.systemInfo?.osVersionText)
}
