internal import Glibc
import ProcessInspection
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
  private static let zlib: Result<Uncompress, FormatError> =
    SystemLibrary.symbol("libz.so.1", "uncompress", as: Uncompress.self).mapError(sectionError)
  private static let zstd: Result<(ZSTDDecompress, ZSTDIsError), FormatError> = {
    switch (SystemLibrary.symbol("libzstd.so.1", "ZSTD_decompress", as: ZSTDDecompress.self),
            SystemLibrary.symbol("libzstd.so.1", "ZSTD_isError", as: ZSTDIsError.self)) {
    case (.success(let decompress), .success(let isError)): .success((decompress, isError))
    case (.failure(let error), _), (_, .failure(let error)): .failure(sectionError(error))
    }
  }()

  private static func sectionError(_ error: SystemLibrary.LoadError) -> FormatError {
    switch error {
    case let .cannotLoad(library, reason):
      .dwarf(section: "compressed section", offset: 0, "cannot load \(library) to decompress it: \(reason)")
    case let .missingSymbol(library, name):
      .dwarf(section: "compressed section", offset: 0, "\(library) has no \(name)")
    }
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

/// The system's compression libraries, each function loaded with `dlopen`/`dlsym` the first time it
/// is needed: the one loader of libz and libzstd, for decompression (`SystemDecompressor`) and
/// compression (`ZstdStreamCompressor`).
enum SystemLibrary {
  /// Why a function of a system library cannot be had.
  enum LoadError: Error, CustomStringConvertible {
    /// `dlopen` failed (`reason`: `dlerror()`).
    case cannotLoad(library: String, reason: String)
    /// The library has no such function (an older version).
    case missingSymbol(library: String, name: String)

    var description: String {
      switch self {
      case let .cannotLoad(library, reason): "cannot load \(library): \(reason)"
      case let .missingSymbol(library, name): "\(library) has no \(name)"
      }
    }
  }

  /// `name` from `library` as a C function of type `T`.
  static func symbol<T>(_ library: String, _ name: String, as type: T.Type) -> Result<T, LoadError> {
    guard let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL) else {
      return .failure(.cannotLoad(library: library, reason: dlerror().map { String(cString: $0) } ?? "not found"))
    }
    guard let address = dlsym(handle, name) else { return .failure(.missingSymbol(library: library, name: name)) }
    return .success(unsafeBitCast(address, to: type))
  }
}

/// Compresses a stream of bytes into one zstd frame (with its content checksum, so `zstd -t` checks
/// it) written to a descriptor as it goes, with the system's libzstd (`ZSTD_compressStream2`, zstd
/// 1.4 and later). Memory is zstd's at its default level (a few MiB), whatever the stream's length.
/// Not for concurrent use.
package final class ZstdStreamCompressor {
  private typealias CreateContext = @convention(c) () -> OpaquePointer?
  private typealias FreeContext = @convention(c) (OpaquePointer?) -> Int
  private typealias SetParameter = @convention(c) (OpaquePointer?, Int32, Int32) -> Int
  // (context, ZSTD_outBuffer *, ZSTD_inBuffer *, ZSTD_EndDirective): each buffer is three words,
  // { pointer, size, pos }, passed here as an array of three Ints.
  private typealias CompressStream = @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int>?,
                                                     UnsafeMutablePointer<Int>?, Int32) -> Int
  private typealias IsError = @convention(c) (Int) -> UInt32
  private typealias ErrorName = @convention(c) (Int) -> UnsafePointer<CChar>?

  private struct Functions {
    var create: CreateContext, free: FreeContext, setParameter: SetParameter, compress: CompressStream
    var isError: IsError, errorName: ErrorName
  }

  private static let functions: Result<Functions, SystemLibrary.LoadError> = {
    func load<T>(_ name: String, _ type: T.Type) throws(SystemLibrary.LoadError) -> T {
      try SystemLibrary.symbol("libzstd.so.1", name, as: type).get()
    }
    do throws(SystemLibrary.LoadError) {
      return .success(Functions(create: try load("ZSTD_createCCtx", CreateContext.self),
                                free: try load("ZSTD_freeCCtx", FreeContext.self),
                                setParameter: try load("ZSTD_CCtx_setParameter", SetParameter.self),
                                compress: try load("ZSTD_compressStream2", CompressStream.self),
                                isError: try load("ZSTD_isError", IsError.self),
                                errorName: try load("ZSTD_getErrorName", ErrorName.self)))
    } catch {
      return .failure(error)
    }
  }()

  /// Why compressing stopped. `description` is one line.
  package enum Failure: Error, CustomStringConvertible {
    /// libzstd cannot be loaded, or lacks a function (why, as one line).
    case unavailable(String)
    /// zstd refused (`ZSTD_getErrorName`).
    case zstd(String)
    /// Writing the compressed bytes failed.
    case write(SystemError)

    package var description: String {
      switch self {
      case .unavailable(let reason): reason
      case .zstd(let name): "zstd: \(name)"
      case .write(let error): "\(error)"
      }
    }
  }

  /// `ZSTD_c_compressionLevel`, `ZSTD_c_checksumFlag`; `ZSTD_e_continue`, `ZSTD_e_end`.
  private static let levelParameter: Int32 = 100, checksumParameter: Int32 = 201
  private static let continueDirective: Int32 = 0, endDirective: Int32 = 2
  /// zstd's default level.
  package static let defaultLevel: Int32 = 3
  private static let outputSize = 128 * 1024

  private let functions: Functions
  private let context: OpaquePointer
  private let descriptor: Int32
  private let output: UnsafeMutableRawBufferPointer
  /// How many compressed bytes were written.
  package private(set) var bytesWritten = 0

  /// A compressor writing to `descriptor` (not closed here).
  package init(writingTo descriptor: Int32, level: Int32 = defaultLevel) throws(Failure) {
    let functions: Functions
    do { functions = try Self.functions.get() } catch { throw .unavailable(error.description) }
    guard let context = functions.create() else { throw .zstd("ZSTD_createCCtx returned nothing") }
    self.functions = functions
    self.context = context
    self.descriptor = descriptor
    output = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.outputSize, alignment: 16)
    try check(functions.setParameter(context, Self.levelParameter, level))
    try check(functions.setParameter(context, Self.checksumParameter, 1))
  }

  deinit {
    _ = functions.free(context)
    output.deallocate()
  }

  /// Compresses `bytes`, writing what zstd has ready.
  package func write(_ bytes: UnsafeRawBufferPointer) throws(Failure) {
    guard bytes.count > 0 else { return }
    try run(bytes, directive: Self.continueDirective)
  }

  /// Ends the frame and writes the rest.
  package func finish() throws(Failure) {
    try run(UnsafeRawBufferPointer(start: nil, count: 0), directive: Self.endDirective)
  }

  private func run(_ bytes: UnsafeRawBufferPointer, directive: Int32) throws(Failure) {
    var input = [Int(bitPattern: bytes.baseAddress), bytes.count, 0]
    // Each round either consumes input or writes output; zstd returns 0 once an end is flushed.
    while true {
      var out = [Int(bitPattern: output.baseAddress), output.count, 0]
      let left = out.withUnsafeMutableBufferPointer { outWords in
        input.withUnsafeMutableBufferPointer { inWords in
          functions.compress(context, outWords.baseAddress, inWords.baseAddress, directive)
        }
      }
      try check(left)
      if out[2] > 0 {
        guard writeAll(to: descriptor, UnsafeRawBufferPointer(rebasing: output[0..<min(out[2], output.count)])) else {
          throw .write(.current("cannot write the compressed core"))
        }
        bytesWritten += out[2]
      }
      let consumed = input[2] >= input[1]
      if directive == Self.endDirective ? left == 0 : consumed && out[2] < output.count { return }
    }
  }

  private func check(_ result: Int) throws(Failure) {
    guard functions.isError(result) != 0 else { return }
    throw .zstd(functions.errorName(result).map { String(cString: $0) } ?? "error \(result)")
  }
}
