internal import Glibc

/// Turns mangled Swift and C++ names into readable ones, with the demanglers the process already has:
/// the Swift runtime's `_swift_backtrace_demangle` (the simplified names Swift's backtracer and
/// Apple's crash reports print, C++ included) or `swift_demangle`, and `__cxa_demangle` from
/// libstdc++. Each is looked up with `dlsym`; a missing one leaves names as they are.
public final class Demangler {
  /// How names are written.
  public enum Style: String, Sendable, CaseIterable {
    /// `Crasher.run(_:)`, as Swift's backtracer and Apple's symbolicated reports write names.
    case simplified
    /// `crasher.Crasher.run(Swift.String) -> Swift.Int`, as `swift demangle` writes them.
    case full
    /// The names as stored in the file.
    case none
  }

  /// How this demangler writes names.
  package let style: Style
  private var cache: [String: String] = [:]

  // The mangled name is a plain `const char *`: taken as a raw pointer, so bytes borrowed from a symbol
  // table go in without rebinding memory.
  private typealias BacktraceDemangle = @convention(c) (
    UnsafeRawPointer?, Int, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<CInt>?
  ) -> UnsafeMutablePointer<CChar>?
  private typealias SwiftDemangle = @convention(c) (
    UnsafePointer<CChar>?, Int, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?, UInt32
  ) -> UnsafeMutablePointer<CChar>?
  private typealias CxaDemangle = @convention(c) (
    UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<CInt>?
  ) -> UnsafeMutablePointer<CChar>?

  private let backtraceDemangle: BacktraceDemangle?
  private let swiftDemangle: SwiftDemangle?
  private let cxaDemangle: CxaDemangle?
  /// Reused output for `_swift_backtrace_demangle`, which copies into a buffer it is given (and never
  /// reallocates it), so a name costs no allocation beyond its Swift string.
  private var buffer: UnsafeMutablePointer<CChar>?
  private var bufferSize = 0
  private let initialBufferSize: Int

  /// A demangler writing names in `style`; looks the runtime's demanglers up once.
  public convenience init(style: Style) { self.init(style: style, initialBufferSize: 1024) }

  /// `initialBufferSize`: the first output buffer's size (tests make it tiny, so names outgrow it).
  init(style: Style, initialBufferSize: Int) {
    self.style = style
    self.initialBufferSize = max(1, initialBufferSize)
    let handle = dlopen(nil, RTLD_NOW)
    func symbol<T>(_ name: String, as type: T.Type) -> T? {
      guard let address = dlsym(handle, name) else { return nil }
      return unsafeBitCast(address, to: type)
    }
    // A runtime linked in statically (`-static-stdlib`, as the imagelog executable is) keeps its symbols
    // out of the dynamic table, where dlsym cannot see them: then the linked ones are called directly.
    backtraceDemangle = symbol("_swift_backtrace_demangle", as: BacktraceDemangle.self)
      ?? { linkedBacktraceDemangle($0, $1, $2, $3, $4) }
    swiftDemangle = symbol("swift_demangle", as: SwiftDemangle.self) ?? { linkedSwiftDemangle($0, $1, $2, $3, $4) }
    cxaDemangle = symbol("__cxa_demangle", as: CxaDemangle.self)
  }

  deinit { buffer?.deallocate() }

  /// Which demanglers were found (for `--help` and the report's notes).
  package var available: [String] {
    [backtraceDemangle != nil ? "_swift_backtrace_demangle" : nil, swiftDemangle != nil ? "swift_demangle" : nil,
     cxaDemangle != nil ? "__cxa_demangle" : nil].compactMap { $0 }
  }

  /// The readable form of `name`, or `name` itself when it is not mangled (or demangling fails).
  /// `cached: false` skips the name-keyed cache, for callers that cache by address themselves.
  public func demangle(_ name: String, cached: Bool = true) -> String {
    guard style != .none, Self.looksMangled(name) else { return name }
    if cached, let known = cache[name] { return known }
    let result = name.withCString { pointer -> String? in
      let length = strlen(pointer)
      switch style {
      case .simplified:
        if let backtraceDemangle {
          var status: CInt = 0
          if let output = backtraceDemangle(pointer, length, nil, nil, &status) { return Self.take(output) }
        }
        fallthrough
      case .full:
        if name.hasPrefix("_Z") {
          var status: CInt = 0
          if let cxaDemangle, let output = cxaDemangle(pointer, nil, nil, &status), status == 0 { return Self.take(output) }
        } else if let swiftDemangle, let output = swiftDemangle(pointer, length, nil, nil, 0) {
          return Self.take(output)
        }
        return nil
      case .none: return nil
      }
    }
    let demangled = result ?? name
    if cached { cache[name] = demangled }
    return demangled
  }

  /// The readable form of the raw name in `bytes` (a symbol table's bytes: a NUL must follow them in
  /// memory, as `SymbolTable.withRawName(at:_:)` guarantees), or `nil` when the name stays as it is
  /// (not mangled, demangling failed, or style `none`). Uncached: same answers as `demangle(_:)`.
  package func demangle(rawName bytes: UnsafeRawBufferPointer) -> String? {
    guard style != .none, let start = bytes.baseAddress, Self.looksMangled(bytes) else { return nil }
    if style == .simplified, let backtraceDemangle {
      if bufferSize == 0 {
        buffer = .allocate(capacity: initialBufferSize)
        bufferSize = initialBufferSize
      }
      for _ in 0..<2 {  // a second try only after growing to the size the first one asked for
        guard let buffer else { break }
        var size = bufferSize
        var status: CInt = 0
        guard let output = backtraceDemangle(start, bytes.count, buffer, &size, &status) else { break }
        if output != buffer { return Self.changed(Self.take(output), from: bytes) }  // not ours: a malloc'd result
        if size <= bufferSize {
          let result = UnsafeRawBufferPointer(start: buffer, count: strnlen(buffer, bufferSize))
          return result.elementsEqual(bytes) ? nil : String(decoding: result, as: UTF8.self)
        }
        // Truncated: `size` is what the whole name needs (with its NUL).
        buffer.deallocate()
        self.buffer = .allocate(capacity: size)
        bufferSize = size
      }
    }
    let name = String(decoding: bytes, as: UTF8.self)
    let demangled = demangle(name, cached: false)
    return demangled == name ? nil : demangled
  }

  private static func changed(_ name: String, from bytes: UnsafeRawBufferPointer) -> String? {
    name.utf8.elementsEqual(bytes) ? nil : name
  }

  package static func looksMangled(_ bytes: UnsafeRawBufferPointer) -> Bool {
    func starts(_ prefix: StaticString) -> Bool {
      prefix.utf8CodeUnitCount <= bytes.count
        && prefix.withUTF8Buffer { prefix in zip(prefix, bytes).allSatisfy { $0 == $1 } }
    }
    return starts("$s") || starts("$S") || starts("_T") || starts("_Z") || starts("$e") || starts("@__swiftmacro")
      || starts("_$s")
  }

  package static func looksMangled(_ name: String) -> Bool {
    name.hasPrefix("$s") || name.hasPrefix("$S") || name.hasPrefix("_T") || name.hasPrefix("_Z")
      || name.hasPrefix("$e") || name.hasPrefix("@__swiftmacro") || name.hasPrefix("_$s")
  }

  private static func take(_ pointer: UnsafeMutablePointer<CChar>) -> String {
    defer { free(pointer) }
    return String(cString: pointer)
  }
}

// The runtime's C entry points, bound at link time (as the standard library binds `swift_demangle` for
// its own `_stdlib_demangleImpl`): pointer and integer arguments pass the same way under the Swift and
// C calling conventions.
@_silgen_name("_swift_backtrace_demangle")
private func linkedBacktraceDemangle(
  _ mangledName: UnsafeRawPointer?, _ length: Int, _ outputBuffer: UnsafeMutablePointer<CChar>?,
  _ outputBufferSize: UnsafeMutablePointer<Int>?, _ status: UnsafeMutablePointer<CInt>?
) -> UnsafeMutablePointer<CChar>?

@_silgen_name("swift_demangle")
private func linkedSwiftDemangle(
  _ mangledName: UnsafePointer<CChar>?, _ length: Int, _ outputBuffer: UnsafeMutablePointer<CChar>?,
  _ outputBufferSize: UnsafeMutablePointer<Int>?, _ flags: UInt32
) -> UnsafeMutablePointer<CChar>?
