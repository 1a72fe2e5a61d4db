extension SymbolTable {
  /// `STT_NOTYPE`, `STT_FUNC`, `STT_GNU_IFUNC`: the symbol types that can name code.
  static func isCodeType(_ type: UInt8) -> Bool { type == 0 || type == 2 || type == 10 }

  /// Decodes an ELF symbol table section (`SHT_SYMTAB` or `SHT_DYNSYM`) with its linked string table.
  ///
  /// Keeps defined (`st_shndx` not `SHN_UNDEF`, not `SHN_ABS` for `STT_NOTYPE`) symbols of function type
  /// or no type with a non-empty name, leaving out ARM/AArch64 mapping symbols (`$x`, `$d`, `$a`, `$t`).
  /// `entrySize` is `sh_entsize`; a table whose size is not a multiple of it ignores the tail.
  package static func elf(symbols: ByteReader, strings: ByteReader, entrySize: Int,
                         is64Bit: Bool) throws(FormatError) -> SymbolTable {
    let names = copyStrings(strings)
    var entries: [Entry] = []
    entries.reserveCapacity(symbols.count / max(entrySize, 1))  // sized by the data, not a field
    try forEachCodeSymbol(symbols: symbols, strings: strings, entrySize: entrySize, is64Bit: is64Bit) { entry in
      var entry = entry
      // The name is terminated (forEachCodeSymbol checked), so this stays inside `names`.
      entry.nameLength = UInt32(nameLength(in: names, at: Int(entry.nameOffset)) ?? 0)
      entries.append(entry)
      return true
    }
    return SymbolTable(entries: entries, names: names)
  }

  /// The table `elf(symbols:strings:entrySize:is64Bit:)` would make, cut down to what `addresses` need:
  /// for each address the symbol that table's `index(containing:)` finds, and no other. One pass over the
  /// entries with no sort and no names decoded but the kept ones: for a few addresses in a large table
  /// (a backtrace in libc), the way `eu-stack` looks symbols up. Other addresses must not be asked.
  package static func elf(symbols: ByteReader, strings: ByteReader, entrySize: Int, is64Bit: Bool,
                         for addresses: [UInt64]) throws(FormatError) -> SymbolTable {
    var queries: [UInt64] = []  // sorted, each once
    queries.reserveCapacity(addresses.count)
    for address in addresses.sorted() where queries.last != address { queries.append(address) }
    guard !queries.isEmpty else { return SymbolTable() }
    // Slot i holds the best symbol starting in (queries[i-1], queries[i]]: the one the sorted table
    // would keep for the greatest such start (the first of its address in `init`'s order).
    var best = [Entry?](repeating: nil, count: queries.count)
    // Each slot's best start so far (0 while empty: a symbol at 0 is still compared with `best`), read
    // first: it turns most entries down without an Entry copied out of `best`.
    var bestStart = [UInt64](repeating: 0, count: queries.count)
    var slot = 0
    let firstQuery = queries[0], lastQuery = queries[queries.count - 1]
    // Finding each entry's slot is most of the pass. The span of the queries is cut into at most
    // `bucketLimit` equal buckets, each knowing the first query at or above its start: an entry's
    // slot is then searched for among its bucket's queries only (most often none or one).
    let span = lastQuery - firstQuery
    let shift = (UInt64(12)...63).first { span >> $0 < Self.bucketLimit } ?? 63  // span >> 63 <= 1
    let bucketStart = Self.bucketStarts(queries, shift: shift)
    // Most entries lose to a better symbol on their address alone: their names (scattered over the
    // string table) are checked only for those that would be kept.
    try queries.withUnsafeBufferPointer { queries throws(FormatError) in
      try forEachCodeSymbol(symbols: symbols, strings: strings, entrySize: entrySize, is64Bit: is64Bit, where: { entry in
        let address = entry.address
        guard address <= lastQuery else { return false }  // above every query: in no slot
        var low = 0, high = 0
        if address > firstQuery {
          let bucket = Int((address - firstQuery) >> shift)  // < bucketCount: address <= lastQuery
          low = bucketStart[bucket]
          high = bucketStart[bucket + 1]  // at or above the next bucket's start, so above `address`
        }
        while low < high {  // the first query at or above the symbol's start
          let middle = low + (high - low) / 2
          if queries[middle] < address { low = middle + 1 } else { high = middle }
        }
        // low < queries.count: the last query is at or above the address.
        guard address >= bestStart[low] else { return false }
        if let current = best[low], current.address > address
          || (current.address == address && !sortsBefore(entry, current)) { return false }
        slot = low
        return true
      }) { entry in
        best[slot] = entry
        bestStart[slot] = entry.address
        return true
      }
    }
    // A query's symbol is the best of the last filled slot at or below it: the kept entries are those,
    // with their names copied out of the string table, which stays where it is.
    var kept: [Entry] = []
    var names: [UInt8] = []
    for case let entry? in best {
      // forEachCodeSymbol checked the name is terminated inside `strings`.
      let length = (try? strings.cStringLength(at: Int(entry.nameOffset))) ?? 0
      var copy = entry
      copy.nameOffset = UInt32(truncatingIfNeeded: names.count)  // names.count <= strings.count <= UInt32.max
      copy.nameLength = UInt32(truncatingIfNeeded: length)
      names += (try? strings.bytes(at: Int(entry.nameOffset), length: length)) ?? []
      names.append(0)
      kept.append(copy)
    }
    return SymbolTable(entries: kept, names: names)
  }

  /// The most buckets `elf(symbols:strings:entrySize:is64Bit:for:)` cuts its queries' span into.
  static let bucketLimit: UInt64 = 512

  /// For each bucket of `1 << shift` addresses from the first query on, the index of the first query
  /// at or above its start; then `queries.count`, past the last bucket.
  static func bucketStarts(_ queries: [UInt64], shift: UInt64) -> [Int] {
    let firstQuery = queries[0]
    let bucketCount = Int((queries[queries.count - 1] - firstQuery) >> shift) + 1  // <= bucketLimit
    var starts = [Int](repeating: queries.count, count: bucketCount + 1)
    var next = 0
    for bucket in 0..<bucketCount {
      let start = firstQuery + UInt64(bucket) << shift  // <= the last query: no overflow
      while queries[next] < start { next += 1 }  // the last query is at or above `start`
      starts[bucket] = next
    }
    return starts
  }

  /// Whether an ELF symbol table section has a symbol `elf(symbols:...)` would keep; stops at the first.
  package static func elfHasCodeSymbols(symbols: ByteReader, strings: ByteReader, entrySize: Int,
                                       is64Bit: Bool) throws(FormatError) -> Bool {
    var found = false
    try forEachCodeSymbol(symbols: symbols, strings: strings, entrySize: entrySize, is64Bit: is64Bit) { _ in
      found = true
      return false
    }
    return found
  }

  /// Calls `body` with each entry of the symbol table that can name code (see `elf(symbols:...)`), in
  /// file order, until it returns false, with the name's offset checked to be a non-empty,
  /// NUL-terminated string of `strings` (`nameLength` left 0: measuring every name is left to the
  /// callers that keep every entry). The string table is read in place, not copied.
  /// `candidate`, when given, is asked first, before the name is checked: an entry it turns down is skipped.
  @inline(__always)  // its callers' closures inlined into the loop: it runs once per symbol-table entry
  static func forEachCodeSymbol(symbols: ByteReader, strings: ByteReader, entrySize: Int, is64Bit: Bool,
                                where candidate: (Entry) -> Bool = { _ in true },
                                _ body: (Entry) -> Bool) throws(FormatError) {
    let expected = is64Bit ? 24 : 16
    guard entrySize >= expected else {
      throw .elf("symbol table sh_entsize \(entrySize) is smaller than \(expected)")
    }
    guard strings.count <= Int(UInt32.max) else {
      throw .limitExceeded("string table size", value: UInt64(strings.count), limit: UInt64(UInt32.max))
    }
    let little = symbols.endian == .little
    strings.withUnsafeBytes { names in symbols.withUnsafeBytes { table in
      // A name starting at or before the table's last NUL is terminated inside it.
      guard let lastNul = names.lastIndex(of: 0) else { return }
      let count = symbols.count / entrySize
      let infoOffset = is64Bit ? 4 : 12
      // The entries are read straight from the table's bytes, not through ByteReader.field: this loop
      // runs once per symbol (tens of thousands in a large library), and each field's bounds follow
      // from the entry's, checked once here: index < count = table.count / entrySize, and every field
      // lies within the entry's first `expected` bytes (entrySize >= expected).
      @inline(__always) func field<T: FixedWidthInteger>(_: T.Type, _ position: Int) -> T {
        let raw = table.loadUnaligned(fromByteOffset: position, as: T.self)
        return little ? T(littleEndian: raw) : T(bigEndian: raw)
      }
      for index in 0..<count {
        let base = index &* entrySize
        // The type first: most entries that are not code are passed over on one byte.
        let info = field(UInt8.self, base &+ infoOffset)
        let type = info & 0xF
        guard isCodeType(type) else { continue }
        let binding = info >> 4
        let nameOffset = field(UInt32.self, base)
        let sectionIndex: UInt16, value: UInt64, size: UInt64
        if is64Bit {
          sectionIndex = field(UInt16.self, base &+ 6)
          value = field(UInt64.self, base &+ 8)
          size = field(UInt64.self, base &+ 16)
        } else {
          value = UInt64(field(UInt32.self, base &+ 4))
          size = UInt64(field(UInt32.self, base &+ 8))
          sectionIndex = field(UInt16.self, base &+ 14)
        }
        guard sectionIndex != 0, sectionIndex != 0xFFF1, nameOffset != 0 else { continue }
        // Prefer functions over untyped labels, then global/weak over local (as llvm-symbolizer does).
        let rank: UInt8 = (type == 0 ? 2 : 0) + (binding == 0 ? 1 : 0)
        // `order` only breaks ties between aliases.
        let entry = Entry(address: value, size: size, nameOffset: nameOffset, nameLength: 0, rank: rank,
                          order: UInt32(truncatingIfNeeded: index))
        guard candidate(entry) else { continue }
        // UInt32 -> Int is exact on 64-bit. From here on every byte read is at or before `lastNul`:
        // a byte other than NUL at `start + k` puts `start + k + 1` at or before it.
        let start = Int(nameOffset)
        guard start <= lastNul, names[start] != 0 else { continue }
        // Mapping symbols: `$x`, `$d`, `$x.123`.
        if names[start] == UInt8(ascii: "$"), names[start + 1] != 0,
           names[start + 2] == 0 || names[start + 2] == UInt8(ascii: ".") {
          continue
        }
        guard body(entry) else { return }
      }
    } }
  }
}
