/// A binary's function symbols, sorted by address, for address-to-name lookups.
///
/// Built from ELF `.symtab`/`.dynsym`, Mach-O `LC_SYMTAB` and `LC_FUNCTION_STARTS`. Names are kept as
/// bytes of one copied string table and decoded only for the symbols a lookup returns, so a table of
/// 100,000 symbols costs one sort and one copy. A value: no reader is kept.
package struct SymbolTable: Sendable {
  /// One symbol: a start address (link-time), a size (0 when the format has none) and its name.
  package struct Symbol: Sendable, Equatable {
    /// The raw (mangled) name as stored in the file, without Mach-O's leading `_`.
    package var name: String
    /// Link-time start address.
    package var address: UInt64
    /// Size in bytes; 0 when unknown (Mach-O, `LC_FUNCTION_STARTS`, unsized ELF symbols).
    package var size: UInt64
  }

  struct Entry: Sendable {
    var address: UInt64
    var size: UInt64
    /// Offset and length of the name in `names`; length 0 for an unnamed function start.
    var nameOffset: UInt32
    var nameLength: UInt32
    /// Lower is preferred when several symbols share an address.
    var rank: UInt8
    /// The position in the file's table: among aliases of equal rank and size the later one wins,
    /// as in `llvm-symbolizer` (a stable sort by address and size, keeping the last).
    var order: UInt32 = 0
  }

  var entries: [Entry]
  var names: [UInt8]

  /// The number of distinct symbol addresses.
  package var count: Int { entries.count }

  init(entries: consuming [Entry], names: [UInt8]) {
    var sorted = entries  // the caller's array, sorted and thinned in place: no copies of the table
    sorted.sort(by: Self.sortsBefore)
    var kept = 0
    for index in sorted.indices where kept == 0 || sorted[kept - 1].address != sorted[index].address {
      sorted[kept] = sorted[index]  // kept <= index
      kept += 1
    }
    sorted.removeLast(sorted.count - kept)
    self.entries = sorted
    self.names = names
  }

  /// The table's order: by address, then the entry kept for an address first (a function before a
  /// label, global before local, the largest, as llvm-symbolizer picks; the later alias).
  static func sortsBefore(_ a: Entry, _ b: Entry) -> Bool {
    if a.address != b.address { return a.address < b.address }
    if a.rank != b.rank { return a.rank < b.rank }
    if a.size != b.size { return a.size > b.size }
    return a.order > b.order
  }

  /// An empty table.
  package init() { entries = []; names = [] }

  /// The symbol containing `address`: the one with the greatest start not above it. A sized symbol
  /// whose end is at or below `address` does not contain it (as `llvm-symbolizer` decides); an
  /// unsized one extends to the next symbol. `nil` below the first symbol.
  package func symbol(containing address: UInt64) -> Symbol? {
    index(containing: address).map { symbol(at: $0) }
  }

  /// The position (in address order, `0..<count`) of the symbol containing `address`, as
  /// `symbol(containing:)` decides, without decoding its name: callers that look up many addresses
  /// key their caches by it.
  package func index(containing address: UInt64) -> Int? {
    var low = 0
    var high = entries.count
    while low < high {  // first entry with start > address
      let middle = low + (high - low) / 2
      if entries[middle].address <= address { low = middle + 1 } else { high = middle }
    }
    guard low > 0 else { return nil }
    let entry = entries[low - 1]
    if entry.size > 0, address - entry.address >= entry.size { return nil }  // address >= entry.address here
    return low - 1
  }

  /// The symbol at `index` (`0..<count`, address order). Traps outside that range, as arrays do.
  package func symbol(at index: Int) -> Symbol {
    let entry = entries[index]
    return Symbol(name: name(of: entry), address: entry.address, size: entry.size)
  }

  /// The link-time start address of the symbol at `index` (`0..<count`).
  package func address(at index: Int) -> UInt64 { entries[index].address }

  /// Calls `body` with the bytes of the raw name of the symbol at `index` (`0..<count`) as stored in
  /// the file, without copying them; a NUL byte follows them in memory, so they can go to C
  /// demanglers as they are. Empty for an unnamed function start (whose `symbol(at:)` name is
  /// `func_0xADDR`). The bytes are valid only inside `body`.
  package func withRawName<R>(at index: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
    let entry = entries[index]
    guard entry.nameLength > 0 else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
    return try names.withUnsafeBytes { all in
      // Offsets were checked against `names` when the entry was made: the name and its NUL are inside.
      try body(UnsafeRawBufferPointer(rebasing: all[Int(entry.nameOffset)..<Int(entry.nameOffset) + Int(entry.nameLength)]))
    }
  }

  /// Every symbol in address order (tests and tools).
  package var symbols: [Symbol] { entries.map { Symbol(name: name(of: $0), address: $0.address, size: $0.size) } }

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
