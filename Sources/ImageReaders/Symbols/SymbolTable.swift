/// A binary's function symbols, sorted by address, for address-to-name lookups.
///
/// Built from ELF `.symtab`/`.dynsym`, Mach-O `LC_SYMTAB` and `LC_FUNCTION_STARTS`. Names are kept as
/// bytes of one copied string table and decoded only for the symbols a lookup returns, so a table of
/// 100,000 symbols costs one sort and one copy. A value: no reader is kept.
public struct SymbolTable: Sendable {
  /// One symbol: a start address (link-time), a size (0 when the format has none) and its name.
  public struct Symbol: Sendable, Equatable {
    /// The raw (mangled) name as stored in the file, without Mach-O's leading `_`.
    public var name: String
    /// Link-time start address.
    public var address: UInt64
    /// Size in bytes; 0 when unknown (Mach-O, `LC_FUNCTION_STARTS`, unsized ELF symbols).
    public var size: UInt64
  }

  struct Entry: Sendable {
    var address: UInt64
    var size: UInt64
    /// Offset and length of the name in `names`; length 0 for an unnamed function start.
    var nameOffset: UInt32
    var nameLength: UInt32
    /// Lower is preferred when several symbols share an address.
    var rank: UInt8
  }

  var entries: [Entry]
  var names: [UInt8]

  /// The number of distinct symbol addresses.
  public var count: Int { entries.count }

  init(entries: [Entry], names: [UInt8]) {
    var sorted = entries
    sorted.sort { $0.address != $1.address ? $0.address < $1.address : $0.rank < $1.rank }
    var unique: [Entry] = []
    unique.reserveCapacity(sorted.count)
    for entry in sorted where unique.last?.address != entry.address { unique.append(entry) }
    self.entries = unique
    self.names = names
  }

  /// An empty table.
  public init() { entries = []; names = [] }

  /// The symbol containing `address`: the one with the greatest start not above it. A sized symbol
  /// whose end is at or below `address` does not contain it (as `llvm-symbolizer` decides); an
  /// unsized one extends to the next symbol. `nil` below the first symbol.
  public func symbol(containing address: UInt64) -> Symbol? {
    var low = 0
    var high = entries.count
    while low < high {  // first entry with start > address
      let middle = low + (high - low) / 2
      if entries[middle].address <= address { low = middle + 1 } else { high = middle }
    }
    guard low > 0 else { return nil }
    let entry = entries[low - 1]
    if entry.size > 0, address - entry.address >= entry.size { return nil }
    return Symbol(name: name(of: entry), address: entry.address, size: entry.size)
  }

  /// Every symbol in address order (tests and tools).
  public var symbols: [Symbol] { entries.map { Symbol(name: name(of: $0), address: $0.address, size: $0.size) } }

  func name(of entry: Entry) -> String {
    guard entry.nameLength > 0 else { return "func_0x" + hexDigits(entry.address) }
    // Offsets were checked against `names` when the entry was made.
    let start = Int(entry.nameOffset)
    return String(decoding: names[start..<start + Int(entry.nameLength)], as: UTF8.self)
  }

  /// Copies the bytes of a string table and records where each name of `offsets` ends, so entries can
  /// point into one array. Returns the copied table.
  static func copyStrings(_ strings: ByteReader) -> [UInt8] {
    strings.withUnsafeBytes { Array($0) }
  }

  /// The length of the NUL-terminated name at `offset` in `strings`, or `nil` when it runs off the end.
  /// Bounded by the table's size.
  static func nameLength(in strings: [UInt8], at offset: Int) -> Int? {
    guard offset >= 0, offset < strings.count else { return nil }
    var end = offset
    while end < strings.count, strings[end] != 0 { end += 1 }
    return end < strings.count ? end - offset : nil
  }
}
