/// The core reader over the same input (most inputs are not cores and stop at the header): its notes,
/// the images it lists (through NT_FILE, or the dynamic linker's link_map list for a core without
/// it), the link_map walk even when NT_FILE names images, and a read of every segment's first bytes
/// and of each image's headers.
func fuzzCore(_ reader: ByteReader) {
  // What a reader of a stream decodes first (imagelog core-handler): the table, the segments in file order.
  if let header = try? ELFHeader(reader), (try? ELFCore.streamProgramHeaderTable(header)) != nil,
     let headers = try? ELFCore.programHeaders(in: reader, header: header) {
    _ = try? ELFCore.streamSegments(headers)
  }
  guard let core = try? ELFCore(source: reader) else { return }
  let list = core.imageList(in: reader)
  for image in list.images {
    _ = image.headers?.buildID?.hex
    if let headers = image.headers { _ = headers.matches(image.mappings, loadAddress: image.loadAddress) }
  }
  _ = list.problems.count
  var walk = ELFCoreLinkMap(core: core) { address, length throws(FormatError) in
    try core.memory(at: address, length: length, in: reader)
  }
  walk.run()
  for image in walk.images { _ = image.headers?.fileMappings(loadBias: 0, path: image.path, pageSize: core.pageSize) }
  for segment in core.segments {
    _ = try? core.memory(at: segment.vmRange.lowerBound, length: 64, in: reader)
    _ = core.availableBytes(from: segment.vmRange.lowerBound)
  }
  _ = core.kernelVersion(in: reader)
  _ = core.crashedThreadIndex
  for thread in core.threads { _ = (thread.registers?.pc, thread.registers?.sp) }
}
