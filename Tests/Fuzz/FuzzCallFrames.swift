// Call frame information for the libFuzzer entry: every CIE and FDE of `.eh_frame`/`.debug_frame`,
// every row of each FDE, and lookups through `.eh_frame_hdr`, as the unwinder would make them.
func fuzzCallFrames(_ file: ELFFile, _ reader: ByteReader) {
  guard let info = try? CallFrameInfo(elf: file, file: reader) else { return }
  for section in [info.ehFrame, info.debugFrame].compactMap({ $0 }) {
    guard let entries = try? section.entries(limit: 4096) else { continue }
    for case let .fde(fde, cie) in entries {
      guard let rows = try? section.rows(of: fde, cie) else { continue }
      _ = try? info.row(at: fde.initialLocation)
      for row in rows {
        for case let .expression(bytes) in [row.cfa] {
          _ = try? CallFrameExpression(bytes, addressSize: 8).evaluate(register: { $0 }, readMemory: { address, _ in address })
        }
      }
    }
  }
}
