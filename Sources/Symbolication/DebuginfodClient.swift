import ProcessInspection
internal import Glibc
import ImageReaders

/// elfutils' debuginfod client library, `libdebuginfod.so.1`, loaded with `dlopen` when it is installed
/// (as elfutils' own libdwfl does): never linked at build time, so imagelog runs where it is absent.
/// Through it, the servers in `DEBUGINFOD_URLS` are asked as gdb, eu-stack and systemd-coredump ask
/// them, and its cache (`DEBUGINFOD_CACHE_PATH`), timeouts and other settings are shared with them.
final class DebuginfodClient {
  private typealias Begin = @convention(c) () -> OpaquePointer?
  private typealias Find = @convention(c) (OpaquePointer?, UnsafePointer<UInt8>?, Int32,
                                           UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32
  private typealias End = @convention(c) (OpaquePointer?) -> Void

  /// The three entry points, resolved once per process. The library stays loaded: elfutils never
  /// unloads it either (libcurl's global state is set up once).
  private struct Library: @unchecked Sendable {  // C function pointers, immutable after loading
    var begin: Begin
    var findDebugInfo: Find
    var end: End
  }

  private static let library: Library? = {
    guard let handle = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL) else { return nil }
    guard let begin = dlsym(handle, "debuginfod_begin"), let find = dlsym(handle, "debuginfod_find_debuginfo"),
          let end = dlsym(handle, "debuginfod_end") else { return nil }
    return Library(begin: unsafeBitCast(begin, to: Begin.self), findDebugInfo: unsafeBitCast(find, to: Find.self),
                   end: unsafeBitCast(end, to: End.self))
  }()

  private let library: Library
  private let client: OpaquePointer

  /// A client when `DEBUGINFOD_URLS` names a server and the library is installed; `nil` otherwise
  /// (then no server is asked, as with gdb and elfutils).
  init?() {
    guard let urls = FileSystem.environment("DEBUGINFOD_URLS"), urls.contains(where: { $0 != " " }),
          let library = Self.library, let client = library.begin() else { return nil }
    self.library = library
    self.client = client
  }

  deinit { library.end(client) }

  /// What a query gave.
  enum Answer: Equatable {
    /// The file, now in the client cache.
    case found(path: String)
    /// No server has it (`ENOENT`).
    case notFound
    /// Another failure (server unreachable, timeout...), with its `strerror` text.
    case failed(String)
  }

  /// Asks for the debug file with the GNU build-id `hex` (lowercase hex digits):
  /// `debuginfod_find_debuginfo`, which looks in the client cache first and downloads into it.
  func findDebugInfo(buildIDHex hex: String) -> Answer {
    var path: UnsafeMutablePointer<CChar>?
    // A length of 0 tells the library the build-id is a NUL-terminated hex string.
    let text = Array(hex.utf8) + [0]
    let result = text.withUnsafeBufferPointer { library.findDebugInfo(client, $0.baseAddress, 0, &path) }
    defer { free(path) }
    guard result >= 0 else {
      return -result == ENOENT ? .notFound : .failed(String(cString: strerror(-result)))
    }
    close(result)
    guard let path else { return .failed("no path returned") }
    return .found(path: PathBytes.string(cString: path))
  }
}
