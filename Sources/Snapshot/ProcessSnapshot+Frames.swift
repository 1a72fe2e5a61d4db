extension ProcessSnapshot {
  /// Where a frame is: its thread's index in `threads`, and its index in that thread's `frames`.
  public struct FrameRef: Sendable, Hashable {
    public var thread: Int
    public var frame: Int

    public init(thread: Int, frame: Int) {
      self.thread = thread
      self.frame = frame
    }
  }

  /// Every frame's place, thread by thread, innermost first: the order symbolication and the writers
  /// that list frames (JSON, address lists) go through them.
  public var frameRefs: [FrameRef] {
    var refs: [FrameRef] = []
    refs.reserveCapacity(frameCount)
    for (thread, entry) in threads.enumerated() {
      for frame in entry.frames.indices { refs.append(FrameRef(thread: thread, frame: frame)) }
    }
    return refs
  }

  /// The frame at `ref`.
  public subscript(ref: FrameRef) -> Frame {
    get { threads[ref.thread].frames[ref.frame] }
    set { threads[ref.thread].frames[ref.frame] = newValue }
  }

  /// The indices of the images frames are in, in order, each once.
  public var usedImageIndices: [Int] {
    var used = [Bool](repeating: false, count: images.count)
    for thread in threads {
      for frame in thread.frames { if let index = frame.imageIndex, used.indices.contains(index) { used[index] = true } }
    }
    return used.indices.filter { used[$0] }
  }
}
