internal import Glibc
import ImageReaders

/// Inflates compressed debug sections with the system's zlib (`libz.so.1`, `uncompress`) and zstd
/// (`libzstd.so.1`, `ZSTD_decompress`), each loaded with `dlopen` the first time a section needs it.
///
/// Why these and not an inflater of our own: both libraries are fuzzed upstream, fast, and on every
/// Debian system (zlib1g is essential, libzstd1 is a dependency of dpkg), while a Swift inflater would be
/// new parsing of hostile bytes to prove. Why `dlopen`: the `imagelog` executable's start-up is measured
/// and loads only libc and libm; a file without compressed sections never loads either library.
enum SystemDecompressor {
  private typealias Uncompress = @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<UInt>?,
                                                 UnsafeRawPointer?, UInt) -> Int32
  private typealias ZSTDDecompress = @convention(c) (UnsafeMutableRawPointer?, Int, UnsafeRawPointer?, Int) -> Int
  private typealias ZSTDIsError = @convention(c) (Int) -> UInt32

  /// `uncompress` from libz.so.1, or why it cannot be had. Loaded once, on first use (a lazy static).
  private static let zlib: Result<Uncompress, FormatError> = symbol("libz.so.1", "uncompress", as: Uncompress.self)
  private static let zstd: Result<(ZSTDDecompress, ZSTDIsError), FormatError> = {
    switch (symbol("libzstd.so.1", "ZSTD_decompress", as: ZSTDDecompress.self),
            symbol("libzstd.so.1", "ZSTD_isError", as: ZSTDIsError.self)) {
    case (.success(let decompress), .success(let isError)): .success((decompress, isError))
    case (.failure(let error), _), (_, .failure(let error)): .failure(error)
    }
  }()

  private static func symbol<T>(_ library: String, _ name: String, as type: T.Type) -> Result<T, FormatError> {
    guard let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL) else {
      let reason = dlerror().map { String(cString: $0) } ?? "not found"
      return .failure(.dwarf(section: "compressed section", offset: 0, "cannot load \(library) to decompress it: \(reason)"))
    }
    guard let address = dlsym(handle, name) else {
      return .failure(.dwarf(section: "compressed section", offset: 0, "\(library) has no \(name)"))
    }
    return .success(unsafeBitCast(address, to: type))
  }

  /// A `DWARFDecompressor`: fills `output` from `input`, returning the bytes written.
  static func decompress(_ compression: DWARFCompression, _ input: UnsafeRawBufferPointer,
                         _ output: UnsafeMutableRawBufferPointer) throws(FormatError) -> Int {
    switch compression {
    case .zlib:
      let uncompress = try zlib.get()
      var length = UInt(output.count)
      let status = uncompress(output.baseAddress, &length, input.baseAddress, UInt(input.count))
      guard status == 0 else {  // Z_OK
        throw .dwarf(section: "compressed section", offset: 0, "zlib stream is corrupt (uncompress returned \(status))")
      }
      return Int(length)  // at most output.count
    case .zstd:
      let (decompress, isError) = try zstd.get()
      let result = decompress(output.baseAddress, output.count, input.baseAddress, input.count)
      guard isError(result) == 0 else {
        throw .dwarf(section: "compressed section", offset: 0, "zstd stream is corrupt (ZSTD_decompress error \(-result))")
      }
      return result
    }
  }
}
