internal import CImageLog
internal import Glibc

/// Which loaded image contains an address, and the nearest symbol the loader knows for it.
public struct AddressLookup: Hashable, Sendable {
  /// The address looked up.
  public var address: Address
  /// The image whose loaded span (`Image.loadRange`) contains `address`.
  public var image: Image
  /// The nearest exported (dynamic) symbol at or below `address`, as `dladdr` names it; `nil` when
  /// the loader knows none (static functions, stripped images, data between symbols).
  public var symbolName: String?
  /// Where `symbolName` starts, or `nil`.
  public var symbolAddress: Address?

  /// `address` minus the image's load address.
  public var offsetInImage: UInt64 { address &- image.loadAddress }
  /// `address` minus `symbolAddress`, or `nil`.
  public var offsetInSymbol: UInt64? { symbolAddress.map { address &- $0 } }
}

extension LoadedImages {
  /// The image containing `address`, with the nearest dynamic symbol, or `nil` when no loaded image
  /// spans it. Mirrors `dladdr(3)`; the image comes from `snapshot()`, so its fields are the same.
  public static func image(containing address: Address) -> AddressLookup? {
    guard let image = snapshot().first(where: { $0.loadRange.contains(address) }) else { return nil }
    var lookup = AddressLookup(address: address, image: image, symbolName: nil, symbolAddress: nil)
    var info = il_symbol_info()
    // dladdr answers from the same loader list; accept its symbol only for the same object.
    if il_lookup_address(address, &info) != 0, info.file_base == image.loadAddress,
       let name = info.symbol_name, info.symbol_address != 0 {
      // The name is in the object's dynamic string table: read at most 4096 bytes of it.
      let length = strnlen(name, 4096)
      lookup.symbolName = String(decoding: UnsafeRawBufferPointer(start: name, count: length), as: UTF8.self)
      lookup.symbolAddress = info.symbol_address
    }
    return lookup
  }
}

/// Writes `line` and a newline to standard error with one `write` (lines from threads do not mix).
func writeLineToStandardError(_ line: String) {
  writeAll(to: 2, line + "\n")
}
