import ProcessInspection
import ImageReaders
import Snapshot

extension Symbolicator {
  /// Checks each image of a Linux log that was found by path alone (the report gives no build-id:
  /// `.unverified`) against what the report itself says of it. An offset past the end of the file's
  /// mapped segments (`pastEnd`, by image index), or a function the report names that the file does not
  /// have there (`disagreement`), shows the file is another build: the image becomes `.otherBuild`, and
  /// its frames keep the report's own names, with nothing taken from the file.
  /// `unplaced`: the images as the report gave them, before `placeImagesBySymbols`: an image placed by
  /// the symbols of a file found to be another build goes back to unplaced, and its frames lose their offsets.
  static func checkReportedNames(_ report: inout ProcessSnapshot, refs: [ProcessSnapshot.FrameRef],
                                 unplaced: [ProcessSnapshot.Image], files: [SymbolFile?],
                                 pastEnd: [(lookup: UInt64, end: UInt64)?],
                                 resolutions: inout Resolutions) {
    for position in resolutions.indices {
      guard case .unverified(let path) = resolutions[position].status else { continue }
      let imageIndex = resolutions[position].imageIndex
      guard let file = files[imageIndex] else { continue }
      let reason: String
      if let (lookup, end) = pastEnd[imageIndex] {
        reason = "the report's offset 0x\(hexDigits(lookup)) lies past the end of this file's mapped segments "
          + "(0x\(hexDigits(end))): another build"
      } else if let (reported, found) = disagreement(report, refs: refs, imageIndex: imageIndex, file: file) {
        reason = "the report's names disagree with this file: another build (the report has \(reported); the file has \(found))"
      } else {
        continue
      }
      resolutions[position].status = .otherBuild(path: path, reason: reason)
      let placedByFile = unplaced.indices.contains(imageIndex) && unplaced[imageIndex].loadAddressFromSymbols
      if placedByFile { report.images[imageIndex] = unplaced[imageIndex] }
      for ref in refs where report[ref].imageIndex == imageIndex {
        let reported = reportedFunction(report[ref], in: report).map { [$0] } ?? []
        report[ref].symbols.status = .otherBuild
        report[ref].symbols.lookupAddress = nil
        if placedByFile { report[ref].symbols.imageOffset = nil }
        report[ref].symbols.functions = reported
      }
    }
  }

  /// The first name the report gives for a frame of image `imageIndex` that `file` contradicts, with
  /// what the file has there; `nil` when every name the report gives agrees, or none can be compared
  /// (no name, `n/a`, `??`, no symbol of the file at the frame).
  ///
  /// A report's name agrees with the file's function at the frame when, compared like with like:
  /// - both are equal once each loses what only one side writes (`comparableName`): a function offset
  ///   (`+0x1b3`, Android's `+160`), a symbol version (`@GLIBC_2.2.5`, `@@GLIBC_2.34`), compiler-rt's
  ///   interceptor prefix (`___interceptor_free` is the `free` a sanitizer names), a compiler clone's
  ///   suffix (`.cold`, `.part.0`, `.isra.0`, `.constprop.0`, `.lto_priv.0`, `.llvm.123`, `[clone .cold]`),
  ///   and the parameter list (demanglers write parameters differently);
  /// - a mangled name against a demangled one: each side is also compared demangled (C++, Swift);
  /// - the report names a function DWARF inlined at the address (a symbolizer's innermost name), or an
  ///   alias of the file's function (another symbol at its start: `__libc_start_main_impl` and
  ///   `__libc_start_main`, `__clone` and `clone`), which the lookup table drops;
  /// - the file has a symbol of the report's name whose extent holds the frame (the file's nearest
  ///   symbol is a label inside that function).
  /// A report lists a call inlined at an address as frames with that same address, the outermost last:
  /// only that one names the symbol, so only it is compared. glibc's `symbol+0xoffset` frames agree when
  /// the file's `symbol` (exported: `dladdr` names only those) plus the offset is the frame's address.
  static func disagreement(_ report: ProcessSnapshot, refs: [ProcessSnapshot.FrameRef], imageIndex: Int, file: SymbolFile)
    -> (reported: String, found: String)? {
    struct Named { var written: String; var name: String; var found: String; var start: UInt64; var lookup: UInt64 }
    struct Located { var written: String; var name: String; var offset: UInt64; var linkAddress: UInt64 }
    let demangler = Demangler(style: .full)
    let image = report.images[imageIndex]
    var named: [Named] = []
    var located: [Located] = []
    for frameIndex in refs.indices where report[refs[frameIndex]].imageIndex == imageIndex {
      let frame = report[refs[frameIndex]]
      if let symbol = frame.symbolOffset {
        let (link, below) = frame.address.subtractingReportingOverflow(image.loadAddress)
        guard image.offsetsFromLoadBias, !image.loadAddressFromSymbols, !below else { continue }
        located.append(Located(written: "\(symbol.name)+0x\(hexDigits(symbol.offset))", name: comparableName(symbol.name),
                               offset: symbol.offset, linkAddress: link))
        continue
      }
      if frameIndex + 1 < refs.count, refs[frameIndex + 1].thread == refs[frameIndex].thread,
         report[refs[frameIndex + 1]].address == frame.address { continue }  // inlined into the next frame
      guard let written = frame.reportedFunction?.name, !["??", "???", "<null>", "n/a"].contains(written),
            case .symbolicated = frame.symbols.status, let function = frame.symbols.function,
            let lookup = frame.symbols.lookupAddress, let symbolIndex = file.symbols.index(containing: lookup)
      else { continue }
      let names = frame.symbols.functions.flatMap { [$0.rawName, $0.name] }.compactMap { $0 }
      if names.contains(where: { agree(written, $0, demangler) }) { continue }
      named.append(Named(written: written, name: comparableName(written), found: function.rawName ?? function.name ?? "???",
                         start: file.symbols.address(at: symbolIndex), lookup: lookup))
    }
    guard !named.isEmpty || !located.isEmpty else { return nil }
    let starts = Set(named.map(\.start))
    let wanted = Set(named.map(\.name) + located.map(\.name))
    // A file that cannot be read again gives no verdict.
    guard let symbols = try? symbols(of: file.path, startingAt: starts, named: wanted) else { return nil }
    for item in named {
      let agreed = symbols.contains { symbol in
        guard agree(item.written, symbol.name, demangler) else { return false }
        return symbol.address == item.start
          || (symbol.address <= item.lookup && item.lookup - symbol.address < max(symbol.size, 1))
      }
      if !agreed { return (item.written, "\(item.found) at 0x\(hexDigits(item.lookup))") }
    }
    for item in located {
      let same = symbols.filter { comparableName($0.name) == item.name }
      guard !same.contains(where: { $0.address &+ item.offset == item.linkAddress }) else { continue }
      let found = same.first.map { "\(item.name) at 0x\(hexDigits($0.address))" } ?? "no \(item.name)"
      return (item.written, found)
    }
    return nil
  }

  /// The ELF file's symbols (both tables, aliases too) that start at one of `starts` or whose
  /// `comparableName` is one of `names`.
  private static func symbols(of path: String, startingAt starts: Set<UInt64>,
                              named names: Set<String>) throws -> [SymbolTable.Symbol] {
    let mapped = try MappedFile(path: path)
    return try mapped.withReader { reader throws(FormatError) -> [SymbolTable.Symbol] in
      let file = try ELFFile(reader)
      return try SymbolTable.elfSymbols(file, bytes: reader) { address, name in
        starts.contains(address) || names.contains(comparableName(String(decoding: name, as: UTF8.self)))
      }
    }
  }

  /// True when the report's name `reported` and the file's `name` are one function's, as
  /// `disagreement` lists the cases: compared by `comparableName`, each also demangled.
  static func agree(_ reported: String, _ name: String, _ demangler: Demangler) -> Bool {
    let ours = [comparableName(name), comparableName(demangler.demangle(name))]
    return ours.contains(comparableName(reported)) || ours.contains(comparableName(demangler.demangle(reported)))
  }

  /// `name` without what only one side of a comparison writes: a trailing function offset (`+0x1b3`,
  /// `+160`), a symbol version (`@GLIBC_2.2.5`), compiler-rt's `___interceptor_`/`__interceptor_` prefix,
  /// clone suffixes (`.cold`, `.part.0`, `.isra.0`, `.constprop.0`, `.lto_priv.0`, `.llvm.123`, a demangled
  /// `[clone .cold]`), and a final parameter list with its qualifiers (`(unsigned long) const`).
  static func comparableName(_ name: String) -> String {
    var text = Substring(name.trimmingSpaces)
    if let plus = text.lastIndex(of: "+"), plus > text.startIndex {
      let offset = text[text.index(after: plus)...]
      let digits = offset.hasPrefix("0x") ? offset.dropFirst(2) : offset
      if !digits.isEmpty, digits.allSatisfy({ offset.hasPrefix("0x") ? $0.isHexDigit : $0.isNumber }) { text = text[..<plus] }
    }
    while text.hasSuffix("]"), let clone = text.ranges(of: " [clone ").last { text = text[..<clone.lowerBound] }
    if let at = text.firstIndex(of: "@"), at > text.startIndex, !text[at...].contains("("), !text[at...].contains(" ") {
      text = text[..<at]
    }
    for prefix in ["___interceptor_", "__interceptor_"] where text.hasPrefix(prefix) { text = text.dropFirst(prefix.count) }
    if !text.contains("("), let dot = text.firstIndex(of: "."), dot > text.startIndex {
      let clones: Set<Substring> = ["cold", "part", "isra", "constprop", "lto_priv", "llvm", "localalias", "specialized"]
      if text[text.index(after: dot)...].split(separator: ".").allSatisfy({ clones.contains($0) || $0.allSatisfy(\.isNumber) }) {
        text = text[..<dot]
      }
    }
    // The parameter list and what qualifies it: `foo(int) const &` -> `foo`, `operator()(int)` -> `operator()`.
    for qualifier in [" const", " volatile", " &&", " &", " noexcept"] where text.hasSuffix(qualifier) {
      text = text.dropLast(qualifier.count)
    }
    if text.hasSuffix(")") {
      var depth = 0
      var index = text.index(before: text.endIndex)
      while true {
        if text[index] == ")" { depth += 1 } else if text[index] == "(" { depth -= 1 }
        if depth == 0 { text = text[..<index]; break }
        guard index > text.startIndex else { break }
        index = text.index(before: index)
      }
    }
    return String(text.trimmingSpaces)
  }
}
