/// The core reader over the same input (most inputs are not cores and stop at the header): its notes,
/// the images it lists, and a read of every segment's first bytes and of each image's headers.
func fuzzCore(_ reader: ByteReader) {
  guard let core = try? ELFCore(source: reader) else { return }
  for image in core.images(in: reader) {
    _ = image.headers?.buildID?.hex
    if let headers = image.headers { _ = headers.matches(image.mappings, loadAddress: image.loadAddress) }
  }
  for segment in core.segments {
    _ = try? core.memory(at: segment.vmRange.lowerBound, length: 64, in: reader)
    _ = core.availableBytes(from: segment.vmRange.lowerBound)
  }
  _ = core.kernelVersion(in: reader)
  _ = core.crashedThreadIndex
  for thread in core.threads { _ = (thread.registers?.pc, thread.registers?.sp) }
}
