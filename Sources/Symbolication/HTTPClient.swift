internal import CImageLogProcess
internal import Glibc
import ProcessInspection
import ImageReaders

/// HTTP POSTs through the system's libcurl (`libcurl.so.4`), loaded with `dlopen` the first time one is
/// made, as `libdebuginfod.so.1` is (`DebuginfodClient`): never linked, so imagelog runs where it is
/// absent, and TLS, proxies (`https_proxy`, `no_proxy`...) and certificates are what curl users
/// expect (`CURL_CA_BUNDLE` names a CA file, as for the curl tool). No HTTP is written here: the
/// request's body and headers are handed to libcurl whole.
package enum HTTPClient {
  /// What a server answered.
  package struct Response: Sendable, Equatable {
    /// The HTTP status.
    package var status: Int
    /// The header lines, names as sent.
    package var headers: [(name: String, value: String)]
    /// The body, its first `maximumBody` bytes.
    package var body: [UInt8]

    /// The value of header `name` (case-insensitive), the first one.
    package func header(_ name: String) -> String? {
      headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    package static func == (lhs: Response, rhs: Response) -> Bool {
      lhs.status == rhs.status && lhs.body == rhs.body && lhs.headers.elementsEqual(rhs.headers) { $0 == $1 }
    }
  }

  /// Why no answer came.
  package enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
    /// libcurl is not installed (or too old).
    case noLibrary(String)
    /// The request failed on the way: connection refused or reset, timeout, TLS (libcurl's text).
    case network(String)

    package var description: String {
      switch self {
      case .noLibrary(let reason): "\(reason) (to upload, install libcurl: apt install libcurl4)"
      case .network(let reason): reason
      }
    }
  }

  /// The most of an answer's body kept.
  package static let maximumBody = 1 << 16

  private typealias Init = @convention(c) () -> UnsafeMutableRawPointer?
  private typealias Cleanup = @convention(c) (UnsafeMutableRawPointer?) -> Void
  private typealias Perform = @convention(c) (UnsafeMutableRawPointer?) -> Int32
  private typealias ErrorText = @convention(c) (Int32) -> UnsafePointer<CChar>?
  private typealias ListAppend = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> UnsafeMutableRawPointer?
  private typealias ListFree = @convention(c) (UnsafeMutableRawPointer?) -> Void
  private typealias GlobalInit = @convention(c) (Int) -> Int32
  private typealias Write = @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int

  private struct Library: @unchecked Sendable {  // C function pointers, immutable after loading
    var initialize: Init, cleanup: Cleanup, perform: Perform, errorText: ErrorText
    var listAppend: ListAppend, listFree: ListFree
    var setopt: UnsafeMutableRawPointer, getinfo: UnsafeMutableRawPointer
  }

  /// libcurl's functions, loaded once; the library stays loaded (its global state is set up once).
  private static let library: Result<Library, SystemLibrary.LoadError> = {
    let name = "libcurl.so.4"
    func load<T>(_ symbol: String, _ type: T.Type) throws(SystemLibrary.LoadError) -> T {
      try SystemLibrary.symbol(name, symbol, as: type).get()
    }
    do throws(SystemLibrary.LoadError) {
      let globalInit = try load("curl_global_init", GlobalInit.self)
      _ = globalInit(3)  // CURL_GLOBAL_DEFAULT: SSL and the platform's sockets
      let library = Library(initialize: try load("curl_easy_init", Init.self), cleanup: try load("curl_easy_cleanup", Cleanup.self),
                            perform: try load("curl_easy_perform", Perform.self),
                            errorText: try load("curl_easy_strerror", ErrorText.self),
                            listAppend: try load("curl_slist_append", ListAppend.self),
                            listFree: try load("curl_slist_free_all", ListFree.self),
                            setopt: try load("curl_easy_setopt", UnsafeMutableRawPointer.self),
                            getinfo: try load("curl_easy_getinfo", UnsafeMutableRawPointer.self))
      return .success(library)
    } catch {
      return .failure(error)
    }
  }()

  /// True when libcurl can be loaded.
  package static var isAvailable: Bool { if case .success = library { true } else { false } }

  /// What the callbacks collect.
  private final class Collected {
    var body: [UInt8] = []
    var headerLines: [String] = []
  }

  // libcurl's CURLoption and CURLINFO numbers (curl/curl.h: type base + number).
  private static let optWriteData: Int32 = 10001, optURL: Int32 = 10002, optErrorBuffer: Int32 = 10010
  private static let optPostFields: Int32 = 10015, optUserAgent: Int32 = 10018, optHTTPHeader: Int32 = 10023
  private static let optHeaderData: Int32 = 10029, optCAInfo: Int32 = 10065, optNoProgress: Int32 = 43
  private static let optPost: Int32 = 47, optNoSignal: Int32 = 99, optTimeoutMS: Int32 = 155
  private static let optConnectTimeoutMS: Int32 = 156, optWriteFunction: Int32 = 20011
  private static let optHeaderFunction: Int32 = 20079, optPostFieldSizeLarge: Int32 = 30120
  private static let infoResponseCode: Int32 = 0x200002

  /// POSTs `body` to `url` with the header lines `headers` (`Name: value`), giving up after
  /// `timeoutSeconds` in all. Redirects are not followed (a POST's body is not sent twice).
  package static func post(url: String, headers: [String], body: [UInt8], userAgent: String,
                           timeoutSeconds: Int) -> Result<Response, Failure> {
    let library: Library
    switch Self.library {
    case .success(let loaded): library = loaded
    case .failure(let error): return .failure(.noLibrary(error.description))
    }
    guard let handle = library.initialize() else { return .failure(.network("curl_easy_init failed")) }
    defer { library.cleanup(handle) }
    var list: UnsafeMutableRawPointer?
    // "Expect:" turns off libcurl's "Expect: 100-continue" wait on large bodies.
    for line in headers + ["Expect:"] { list = library.listAppend(list, line) }
    defer { library.listFree(list) }
    let collected = Collected()
    let context = Unmanaged.passRetained(collected)
    defer { context.release() }
    let writeBody: Write = { data, size, count, context in
      guard let data, let context else { return 0 }
      let box = Unmanaged<Collected>.fromOpaque(context).takeUnretainedValue()
      let total = size * count  // libcurl: size is 1 and count at most CURL_MAX_WRITE_SIZE
      let room = max(0, HTTPClient.maximumBody - box.body.count)
      box.body += UnsafeRawBufferPointer(start: data, count: min(total, room))
      return total
    }
    let writeHeader: Write = { data, size, count, context in
      guard let data, let context else { return 0 }
      let box = Unmanaged<Collected>.fromOpaque(context).takeUnretainedValue()
      let total = size * count
      if box.headerLines.count < 200 {
        box.headerLines.append(String(decoding: UnsafeRawBufferPointer(start: data, count: total), as: UTF8.self))
      }
      return total
    }
    var errorBuffer = [CChar](repeating: 0, count: 256)  // CURL_ERROR_SIZE
    let caBundle = FileSystem.environment("CURL_CA_BUNDLE").flatMap { $0.isEmpty ? nil : $0 }
    let code: Int32 = url.withCString { urlText in
      userAgent.withCString { agent in
        body.withUnsafeBytes { bytes in
          errorBuffer.withUnsafeMutableBufferPointer { errors in
            func set(_ option: Int32, long value: Int) { _ = il_curl_setopt_long(library.setopt, handle, option, value) }
            func set(_ option: Int32, pointer value: UnsafeRawPointer?) {
              _ = il_curl_setopt_pointer(library.setopt, handle, option, value)
            }
            set(optURL, pointer: urlText)
            set(optUserAgent, pointer: agent)
            set(optErrorBuffer, pointer: errors.baseAddress)
            set(optNoSignal, long: 1)
            set(optNoProgress, long: 1)
            set(optPost, long: 1)
            set(optHTTPHeader, pointer: list)
            // An empty body still needs a valid pointer.
            set(optPostFields, pointer: bytes.baseAddress ?? UnsafeRawPointer(errors.baseAddress))
            _ = il_curl_setopt_offset(library.setopt, handle, optPostFieldSizeLarge, Int64(bytes.count))
            set(optTimeoutMS, long: max(timeoutSeconds, 1) * 1000)
            set(optConnectTimeoutMS, long: min(max(timeoutSeconds, 1), 30) * 1000)
            set(optWriteFunction, pointer: unsafeBitCast(writeBody, to: UnsafeRawPointer.self))
            set(optWriteData, pointer: context.toOpaque())
            set(optHeaderFunction, pointer: unsafeBitCast(writeHeader, to: UnsafeRawPointer.self))
            set(optHeaderData, pointer: context.toOpaque())
            if let caBundle {
              return caBundle.withCString { path in
                set(optCAInfo, pointer: path)
                return library.perform(handle)
              }
            }
            return library.perform(handle)
          }
        }
      }
    }
    guard code == 0 else {
      let detail = PathBytes.string(cString: errorBuffer)
      let summary = library.errorText(code).map { PathBytes.string(cString: $0) } ?? "error \(code)"
      return .failure(.network(detail.isEmpty ? summary : "\(summary): \(detail)"))
    }
    var status = 0
    _ = il_curl_getinfo_long(library.getinfo, handle, infoResponseCode, &status)
    return .success(Response(status: status, headers: headerFields(collected.headerLines), body: collected.body))
  }

  /// The `Name: value` header lines of the last response (after a `100 Continue`, the final one's).
  static func headerFields(_ lines: [String]) -> [(name: String, value: String)] {
    var fields: [(name: String, value: String)] = []
    for line in lines {
      let text = line.trimmingSuffix()
      if text.hasPrefix("HTTP/") { fields = []; continue }
      guard let colon = text.firstIndex(of: ":") else { continue }
      fields.append((String(text[..<colon]), String(text[text.index(after: colon)...]).trimmingPrefixSpaces()))
    }
    return fields
  }
}

private extension String {
  func trimmingSuffix() -> String {
    var text = Substring(self)
    while let last = text.last, last == "\r" || last == "\n" || last == " " || last == "\r\n" { text = text.dropLast() }
    return String(text)
  }

  func trimmingPrefixSpaces() -> String { String(drop { $0 == " " || $0 == "\t" }) }
}
