public import ProcessInspection

extension ProcessSnapshot {
  /// An image the process removed (`dlclose`) before the snapshot, as the history imagelog keeps for a
  /// crash holds it (`Sources/CImageLog/crash_unloaded.h`: the library's crash table, `imagelog run`'s audit module), or
  /// a minidump's unloaded-module stream (`MINIDUMP_UNLOADED_MODULE`) gives it.
  public struct UnloadedImage: Sendable, Equatable {
    /// Where the image was mapped: its lowest address.
    public var baseAddress: Address
    /// How many bytes were mapped from `baseAddress`.
    public var size: UInt64
    /// The image's path (the file it was loaded from), as the loader named it.
    public var path: String
    /// The whole GNU build-id, empty when the image had none (or the source does not say).
    public var buildID: [UInt8]
    /// How long before the crash (or the snapshot) the image was removed, in nanoseconds, when known.
    public var unloadedBeforeCrashNanoseconds: UInt64?
    /// How long the image had been loaded when it was removed, in nanoseconds, when known.
    public var loadedForNanoseconds: UInt64?
    /// The thread that removed it, when known.
    public var tid: Int32?

    /// An unloaded image with what the source knows of it.
    public init(baseAddress: Address, size: UInt64, path: String, buildID: [UInt8] = [],
                unloadedBeforeCrashNanoseconds: UInt64? = nil, loadedForNanoseconds: UInt64? = nil, tid: Int32? = nil) {
      self.baseAddress = baseAddress
      self.size = size
      self.path = path
      self.buildID = buildID
      self.unloadedBeforeCrashNanoseconds = unloadedBeforeCrashNanoseconds
      self.loadedForNanoseconds = loadedForNanoseconds
      self.tid = tid
    }

    /// The last component of `path`.
    public var name: String { ProcessInspection.Image.shortName(of: path) }

    /// Whether `address` was inside the image's mapping.
    package func contains(_ address: Address) -> Bool { address >= baseAddress && address - baseAddress < size }

    /// "unloaded T ms before the crash by thread N" (the parts known), as a frame in the image and
    /// its Unloaded Images line say it (`crash_unloaded.h`'s `il_unloaded_when`).
    package var whenText: String {
      var text = "unloaded"
      if let before = unloadedBeforeCrashNanoseconds { text += " " + ImageFormatter.milliseconds(before) + " ms before the crash" }
      if let tid { text += " by thread \(UInt32(bitPattern: tid))" }
      return text
    }
  }

  /// An image added or removed after the program started, as the history imagelog keeps for a crash
  /// holds it (`Sources/CImageLog/crash_unloaded.h`'s events): a line of the report's Image Timeline.
  public struct ImageEvent: Sendable, Equatable {
    /// Whether the image was added or removed.
    public enum Kind: String, Sendable {
      /// Added (`dlopen`).
      case loaded
      /// Removed (`dlclose`).
      case unloaded
    }
    /// Added or removed.
    public var kind: Kind
    /// The image's name (its path's last part).
    public var name: String
    /// Where the image was mapped: its lowest address.
    public var baseAddress: Address
    /// When, in nanoseconds relative to the crash (or the snapshot): negative before it.
    public var crashOffsetNanoseconds: Int64
    /// For an unload, how long the image had been loaded, in nanoseconds, when known.
    public var loadedForNanoseconds: UInt64?
    /// The thread that added or removed it, when known.
    public var tid: Int32?

    /// An event with what the source knows of it.
    public init(kind: Kind, name: String, baseAddress: Address, crashOffsetNanoseconds: Int64,
                loadedForNanoseconds: UInt64? = nil, tid: Int32? = nil) {
      self.kind = kind
      self.name = name
      self.baseAddress = baseAddress
      self.crashOffsetNanoseconds = crashOffsetNanoseconds
      self.loadedForNanoseconds = loadedForNanoseconds
      self.tid = tid
    }
  }

  /// The newest unloaded image whose mapping held `address`, when no image of `images` holds it: the
  /// image a frame whose code is no longer mapped was in.
  package func unloadedImage(holding address: Address) -> UnloadedImage? {
    unloadedImages.first { $0.contains(address) }
  }

  /// The newest unloaded image whose mapping held `address`, now in `image` (mapped there after it):
  /// `nil` when none did, or when it was `image` itself loaded again (the same path at the same address).
  package func previousImage(at address: Address, in image: Image) -> UnloadedImage? {
    guard let gone = unloadedImage(holding: address) else { return nil }
    return gone.path == image.path && gone.baseAddress == image.loadAddress ? nil : gone
  }
}
