internal import CImageLogUnwind
internal import ImageReaders

/// How a frame was found (Breakpad's "trust"); the raw value is the mark crash reports print.
public enum FrameTrust: String, Sendable {
  /// Frame 0: the registers the walk started from.
  case context
  /// Call frame information (`.eh_frame`, `.debug_frame`), or the kernel's signal frame.
  case callFrameInfo = "cfi"
  /// The previous frame's frame record (or, for an aarch64 leaf, its link register).
  case framePointer = "frame-pointer"
  /// A stack word that looks like a return address: may be stale.
  case stackScan = "scan"
}

/// One frame of a walk.
public struct UnwoundFrame: Sendable, Equatable {
  /// The frame's pc: where it was interrupted (frame 0, or a frame a signal interrupted), else a return address.
  public var pc: UInt64
  /// How the frame was found.
  public var trust: FrameTrust
  /// True when `pc` is where the frame was interrupted; false for a return address.
  public var pcIsExact: Bool

  /// The address to symbolicate the frame by: `pc`, or `pc - 1` for a return address (inside the call).
  public var lookupAddress: UInt64 { pcIsExact || pc == 0 ? pc : pc - 1 }

  /// A frame as given.
  package init(pc: UInt64, trust: FrameTrust, pcIsExact: Bool) {
    self.pc = pc
    self.trust = trust
    self.pcIsExact = pcIsExact
  }
}

/// Call frame information made one entry at a time (a symbol file's `STACK CFI` records): the walk asks
/// for the entry covering each pc it unwinds, instead of reading a whole section first.
package protocol CallFrameSource: Sendable {
  /// A `.debug_frame` section holding the entry that covers `address` (link-time: the image's run-time
  /// address less its load bias) and its CIE, with the range the entry covers; `nil` when none does.
  func section(covering address: UInt64) -> (range: Range<UInt64>, bytes: [UInt8])?
}

/// A 32-bit x86 Windows module's `STACK WIN` records (its `.sym`), which a walk without the module's
/// code tries before call frame information, as minidump-stackwalk does.
package protocol WindowsFrameSource: Sendable {
  /// The caller's registers (i386) by the record covering `address` (an offset from the module's
  /// base) from `callee`'s; `grandCalleeParameterSize` is the parameter size of the function the
  /// callee called (0 for frame 0, where `hasGrandCallee` is false). `nil` when no record covers the
  /// address or it gives no caller.
  func caller(of callee: RegisterSet, at address: UInt64, grandCalleeParameterSize: UInt32, hasGrandCallee: Bool,
              memory: any MemoryReading) -> RegisterSet?
  /// The parameter size of the function at `address` (an offset from the module's base) as a walk by
  /// `STACK WIN` counts it for the frame above; `nil` when the symbols name no function there.
  func parameterSize(at address: UInt64) -> UInt32?
}

/// One mapped image's call frame information, at run-time addresses.
public struct UnwindImage: Sendable {
  /// The image's executable range: a pc (or return address) inside it belongs to this image.
  package var textRange: Range<UInt64>
  /// Run-time minus link-time address.
  package var loadBias: UInt64
  /// `PT_GNU_EH_FRAME`'s run-time address (`.eh_frame_hdr`), `nil` when none.
  package var ehFrameHeader: UInt64?
  /// `.eh_frame`'s run-time range, when known: walked when there is no usable header.
  package var ehFrame: Range<UInt64>?
  /// `.debug_frame`'s bytes (read from the file; FDE addresses link-time), for images whose
  /// `.eh_frame` does not cover everything. `nil`: none.
  package var debugFrame: [UInt8]?
  /// The size of the image's pointers in its call frame information: 8, or 4 for a 32-bit (ELFCLASS32)
  /// image. A walk from i386 registers reads 4-byte pointers whatever this says.
  package var addressSize: Int
  /// For a module whose symbols are known but whose code cannot be read: true when a symbol names the
  /// run-time address. A scanned word whose code cannot be read is a return address only when it says
  /// so (`StackUnwinder`'s `withoutCode`). `nil`: any address in the text range.
  package var namesAddress: (@Sendable (UInt64) -> Bool)?
  /// `.debug_frame` entries made on demand, in place of `debugFrame`.
  package var callFrames: (any CallFrameSource)?
  /// `STACK WIN` records, tried first for an i386 walk without code (`StackUnwinder`'s `withoutCode`).
  package var windowsFrames: (any WindowsFrameSource)?

  /// An image as given.
  package init(textRange: Range<UInt64>, loadBias: UInt64, ehFrameHeader: UInt64? = nil, ehFrame: Range<UInt64>? = nil,
              debugFrame: [UInt8]? = nil, addressSize: Int = 8) {
    self.textRange = textRange
    self.loadBias = loadBias
    self.ehFrameHeader = ehFrameHeader
    self.ehFrame = ehFrame
    self.debugFrame = debugFrame
    self.addressSize = addressSize == 4 ? 4 : 8
  }

  /// Each of `images` located through `memory` (`locate(loadAddress:loadBias:textRange:in:)`).
  public static func locate(_ images: [Image], in memory: some MemoryReading) -> [UnwindImage] {
    images.map { locate(loadAddress: $0.loadAddress, loadBias: $0.loadBias, textRange: $0.textRange, in: memory) }
  }

  /// Reads the ELF header and program headers at `loadAddress` through `memory`, finds PT_GNU_EH_FRAME
  /// and the image's class (its pointer size). An image whose headers cannot be read or decoded has no
  /// call frame information (frame pointers and scanning still apply to it).
  package static func locate(loadAddress: UInt64, loadBias: UInt64, textRange: Range<UInt64>,
                            in memory: some MemoryReading) -> UnwindImage {
    var image = UnwindImage(textRange: textRange, loadBias: loadBias)
    var headerBytes = [UInt8](repeating: 0, count: 64)
    guard headerBytes.withUnsafeMutableBytes({ memory.read(loadAddress, into: $0) }),
          let header = headerBytes.withUnsafeBytes({ try? ELFHeader(ByteReader($0)) }) else { return image }
    image.addressSize = header.is64Bit ? 8 : 4
    image.ehFrameHeader = ehFrameHeaderAddress(header, loadAddress: loadAddress, loadBias: loadBias, memory: memory)
    return image
  }

  /// The most program headers read (far above what linkers write: 10-15).
  static let maximumProgramHeaders = 256

  static func ehFrameHeaderAddress(_ header: ELFHeader, loadAddress: UInt64, loadBias: UInt64,
                                   memory: some MemoryReading) -> UInt64? {
    guard header.endian == .little, Int(header.programHeaderEntrySize) == header.expectedProgramHeaderSize,
          Int(header.programHeaderCount) <= maximumProgramHeaders else { return nil }
    // At most 256 entries of 56 bytes: no overflow.
    let size = Int(header.programHeaderCount) * Int(header.programHeaderEntrySize)
    let (tableAddress, overflow) = loadAddress.addingReportingOverflow(header.programHeaderOffset)
    guard !overflow, size > 0 else { return nil }
    var table = [UInt8](repeating: 0, count: size)
    guard table.withUnsafeMutableBytes({ memory.read(tableAddress, into: $0) }) else { return nil }
    return table.withUnsafeBytes { raw -> UInt64? in
      var reader = ByteReader(raw)
      for _ in 0..<Int(header.programHeaderCount) {
        guard let programHeader = try? ProgramHeader(&reader, is64Bit: header.is64Bit) else { return nil }
        if programHeader.type == 0x6474_E550 { return loadBias &+ programHeader.vmAddress }  // PT_GNU_EH_FRAME
      }
      return nil
    }
  }
}

/// Walks a thread's stack: call frame information first, then frame pointers where no FDE covers the
/// pc, then stack scanning as the last resort; each frame says which. The C unwinder does the work
/// (the same one the crash handler runs at crash time).
public struct StackUnwinder {
  let memory: any MemoryReading
  let images: [UnwindImage]
  let scanBytes: Int
  /// The images as the C side finds them, made once for every walk (a dump of thousands of threads and
  /// thousands of modules must not rebuild it per thread).
  let lookup: ImageLookup
  let withoutCode: Bool
  /// arm: walk r11's frame records (`il_unwinder.arm_frame_pointers`).
  let armFramePointers: Bool
  /// aarch64 without the code: the bits of a pointer that are address (`il_unwinder.pointer_mask`).
  let pointerMask: UInt64
  /// x86_64 without the code: take rbp's frame records (`il_unwinder.no_x86_64_frame_records` when not).
  let x86_64FrameRecords: Bool
  /// Some image has `STACK WIN` records (found once: a dump's thousands of threads share the answer).
  let hasWindowsFrames: Bool

  /// An unwinder over `memory` and the process's `images` (any order); `scanBytes` bounds how far
  /// above the stack pointer scanning looks (0: never scan). Code before a return address must be
  /// readable and hold a call for the address to be taken.
  public init(memory: some MemoryReading, images: [UnwindImage], scanBytes: Int = 8192) {
    self.init(memory: memory, images: images, scanBytes: scanBytes, withoutCode: false)
  }

  /// The unwinder Symbolication walks a minidump with: `init(memory:images:scanBytes:)`'s, and
  /// `withoutCode`: where the code before a return address cannot be read (a minidump without the
  /// module's file), walk as minidump-stackwalk does (a frame record checked against the stack; a scanned word inside a module, within Breakpad's
  /// window of 40 words, 160 from frame 0 or a CFI frame); without it such a word is never a return
  /// address. Code that can be read is held to the call check either way. `armFramePointers`: a 32-bit
  /// ARM thread's r11 frame records are walked, as minidump-stackwalk walks them on iOS only (elsewhere
  /// r11 and lr may hold anything). `pointerMask`: with `withoutCode`, an aarch64 frame record's pc and
  /// fp and what CFI gives for pc, lr and x29 keep only these bits (pointer authentication's are
  /// stripped, as minidump-stackwalk's arm64.rs strips them); 0: nothing is stripped. `x86_64FrameRecords`
  /// false: with `withoutCode`, an x86_64 thread's rbp frame records are not followed, as
  /// minidump-stackwalk 0.25 follows none on Windows.
  package init(memory: some MemoryReading, images: [UnwindImage], scanBytes: Int = 8192, withoutCode: Bool,
               armFramePointers: Bool = false, pointerMask: UInt64 = 0, x86_64FrameRecords: Bool = true) {
    self.memory = memory
    self.images = images.sorted { $0.textRange.lowerBound < $1.textRange.lowerBound }
    self.scanBytes = max(0, scanBytes)
    lookup = ImageLookup(self.images)
    self.withoutCode = withoutCode
    self.armFramePointers = armFramePointers
    self.pointerMask = pointerMask
    self.x86_64FrameRecords = x86_64FrameRecords
    hasWindowsFrames = images.contains { $0.windowsFrames != nil }
  }

  /// The frames from `registers` (frame 0, which needs pc and sp) outwards, at most `maxFrames`.
  public func unwind(from registers: RegisterSet, maxFrames: Int = 256) -> [UnwoundFrame] {
    unwind(from: registers, in: memory, maxFrames: maxFrames)
  }

  /// The frames from `registers`, reading `memory` instead of the unwinder's own (one thread's view
  /// of a dump: its stack and the modules, as minidump-stackwalk reads a thread), with the same images.
  package func unwind(from registers: RegisterSet, in memory: any MemoryReading, maxFrames: Int = 256) -> [UnwoundFrame] {
    guard maxFrames > 0, registers.pc != nil, registers.sp != nil else { return [] }
    return withCMemory(memory) { cMemory in
      withExtendedLifetime(lookup) {
        var unwinder = il_unwinder()
        unwinder.memory = cMemory.pointee
        unwinder.find_image = imageCallback
        unwinder.find_context = Unmanaged.passUnretained(lookup).toOpaque()
        unwinder.scan_bytes = UInt64(scanBytes)
        unwinder.without_code = withoutCode ? 1 : 0
        unwinder.names_address = namesCallback
        unwinder.arm_frame_pointers = armFramePointers ? 1 : 0
        unwinder.pointer_mask = pointerMask
        unwinder.no_x86_64_frame_records = x86_64FrameRecords ? 0 : 1
        var start = registers.cValue
        var cursor = il_unwind_cursor()
        il_unwind_start(&cursor, &start)
        var frames: [UnwoundFrame] = []
        let windows = withoutCode && registers.architecture == .i386 && hasWindowsFrames
        var parameterSizes: [UInt32?] = []
        while true {
          let frame = RegisterSet(cursor.registers)
          let trust: FrameTrust = switch cursor.trust {
          case IL_FRAME_CFI: .callFrameInfo
          case IL_FRAME_FRAME_POINTER: .framePointer
          case IL_FRAME_SCAN: .stackScan
          default: .context
          }
          frames.append(UnwoundFrame(pc: frame.pc ?? 0, trust: trust, pcIsExact: cursor.pc_is_exact != 0))
          guard frames.count < maxFrames else { break }
          if windows {
            parameterSizes.append(windowsParameterSize(il_unwind_lookup_pc(&cursor)))
            let grandCallee = parameterSizes.count >= 2 ? parameterSizes[parameterSizes.count - 2] : nil
            if let moved = windowsStep(&cursor, frame, grandCalleeParameterSize: grandCallee ?? 0,
                                       hasGrandCallee: parameterSizes.count >= 2, in: memory) {
              if moved { continue }
              break
            }
          }
          guard il_unwind_step(&unwinder, &cursor) != 0 else { break }
        }
        return frames
      }
    }
  }
}

extension StackUnwinder {
  /// The parameter size `STACK WIN` walks count for the frame whose lookup address is `address`.
  func windowsParameterSize(_ address: UInt64) -> UInt32? {
    guard let index = lookup.index(containing: address), let source = lookup.images[index].windowsFrames else { return nil }
    return source.parameterSize(at: address &- lookup.images[index].loadBias)
  }

  /// The caller of the cursor's frame (`callee`) by its module's `STACK WIN` record: true when the
  /// cursor moved, false when the record's caller ends the walk (a pc in the first page, a stack
  /// pointer that did not move up: rust-minidump stops there and tries nothing else), `nil` when no
  /// record gives a caller (call frame information, frame pointers and scanning are tried next).
  func windowsStep(_ cursor: inout il_unwind_cursor, _ callee: RegisterSet, grandCalleeParameterSize: UInt32,
                   hasGrandCallee: Bool, in memory: any MemoryReading) -> Bool? {
    let address = il_unwind_lookup_pc(&cursor)
    guard let index = lookup.index(containing: address), let source = lookup.images[index].windowsFrames,
          var caller = source.caller(of: callee, at: address &- lookup.images[index].loadBias,
                                     grandCalleeParameterSize: grandCalleeParameterSize, hasGrandCallee: hasGrandCallee,
                                     memory: memory) else { return nil }
    // A register the program left unset keeps the callee's value in rust-minidump's walk (its caller
    // context starts as a copy): a program that does not move esp ends the walk there.
    caller.pc = caller.pc ?? callee.pc
    caller.sp = caller.sp ?? callee.sp
    guard let pc = caller.pc, pc >= 4096, let sp = caller.sp, let calleeSP = callee.sp, sp > calleeSP else { return false }
    var next = caller.cValue
    return il_unwind_move(&cursor, &next, IL_FRAME_CFI) != 0
  }
}

/// The images as the C unwinder's find_image sees them: sorted by text start, with each one's
/// `.debug_frame` lent as an il_memory for the walk.
final class ImageLookup {
  let images: [UnwindImage]
  let debugFrames: [MemoryBox?]
  /// For an image with `callFrames`: the entry last made (its range and bytes), read by its MemoryBox.
  let madeFrames: [MadeFrames?]
  /// One il_memory per image (stable addresses the C side keeps during the walk).
  let debugFrameMemories: UnsafeMutablePointer<il_memory>

  /// The one entry of an image's `callFrames` in use: the C side reads it right after `find` lends it
  /// (before any other lookup can replace it).
  final class MadeFrames: MemoryReading {
    var range: Range<UInt64> = 0..<0
    var bytes: [UInt8] = []
    func read(_ address: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
      BufferMemory(bytes).read(address, into: buffer)
    }
  }

  init(_ images: [UnwindImage]) {
    self.images = images
    let made = images.map { $0.callFrames == nil ? nil : MadeFrames() }
    madeFrames = made
    debugFrames = images.indices.map { index in
      if let frames = made[index] { return MemoryBox(frames) }
      return images[index].debugFrame.map { MemoryBox(BufferMemory($0)) }
    }
    debugFrameMemories = .allocate(capacity: max(images.count, 1))
    for (index, box) in debugFrames.enumerated() {
      (debugFrameMemories + index).initialize(to: il_memory(read: memoryCallback,
                                                            context: box.map { Unmanaged.passUnretained($0).toOpaque() }))
    }
  }

  deinit {
    debugFrameMemories.deinitialize(count: images.count)
    debugFrameMemories.deallocate()
  }

  /// The image whose text holds `address`: the last one starting at or below it.
  func index(containing address: UInt64) -> Int? {
    var low = 0, high = images.count
    while low < high {
      let middle = (low + high) / 2
      if images[middle].textRange.lowerBound <= address { low = middle + 1 } else { high = middle }
    }
    return low > 0 && images[low - 1].textRange.contains(address) ? low - 1 : nil
  }

  func find(_ pc: UInt64, _ out: UnsafeMutablePointer<il_unwind_image>) -> Bool {
    guard let index = index(containing: pc) else { return false }
    fill(index, out)
    if let source = images[index].callFrames, let made = madeFrames[index] {
      let link = pc &- images[index].loadBias
      if !made.range.contains(link) {
        guard let (range, bytes) = source.section(covering: link) else { return true }
        made.range = range
        made.bytes = bytes
      }
      out.pointee.debug_frame_memory = UnsafePointer(debugFrameMemories + index)
      out.pointee.debug_frame = 0
      out.pointee.debug_frame_size = UInt64(made.bytes.count)
    }
    return true
  }

  /// False when `address` is in an image whose symbols name no function there (`UnwindImage.namesAddress`).
  func names(_ address: UInt64) -> Bool {
    guard let index = index(containing: address), let names = images[index].namesAddress else { return true }
    return names(address)
  }

  /// The C description of image `index`.
  func fill(_ index: Int, _ out: UnsafeMutablePointer<il_unwind_image>) {
    let image = images[index]
    out.pointee = il_unwind_image()
    out.pointee.text_start = image.textRange.lowerBound
    out.pointee.text_end = image.textRange.upperBound
    out.pointee.load_bias = image.loadBias
    out.pointee.address_size = image.addressSize == 4 ? 4 : 8
    out.pointee.eh_frame_hdr = image.ehFrameHeader ?? 0
    if let ehFrame = image.ehFrame {
      out.pointee.eh_frame = ehFrame.lowerBound
      out.pointee.eh_frame_size = UInt64(ehFrame.count)
    }
    if let bytes = image.debugFrame, !bytes.isEmpty {
      // The memories live as long as this lookup, which outlives the walk.
      out.pointee.debug_frame_memory = UnsafePointer(debugFrameMemories + index)
      out.pointee.debug_frame = 0
      out.pointee.debug_frame_size = UInt64(bytes.count)
    }
  }
}

let namesCallback: @convention(c) (UnsafeMutableRawPointer?, UInt64) -> Int32 = { context, address in
  guard let context else { return 1 }
  return Unmanaged<ImageLookup>.fromOpaque(context).takeUnretainedValue().names(address) ? 1 : 0
}

let imageCallback: @convention(c) (UnsafeMutableRawPointer?, UInt64, UnsafeMutablePointer<il_unwind_image>?) -> Int32 = {
  context, pc, out in
  guard let context, let out else { return 0 }
  return Unmanaged<ImageLookup>.fromOpaque(context).takeUnretainedValue().find(pc, out) ? 1 : 0
}
