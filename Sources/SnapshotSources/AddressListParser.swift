import ProcessInspection
import ImageReaders
import Snapshot

/// Bare addresses (`0x7f3a1c2013a4`, one or more per line) to be resolved in images given on the
/// command line with `--image PATH@LOADADDR`, or listed in the same text the way imagelog's
/// formatter writes them (`crash`: `0xSTART - 0xEND name arch  <uuid> /path`; `logger`:
/// `Added: 0xLOAD (0xSIZE) /path <UUID>`; `unstrip`: `0xSTART+0xSIZE BUILDID@0xADDR FILE DEBUG NAME`).
enum AddressListParser {
  /// True when `text` holds at least one word and every word is a `0x` address (words split at
  /// spaces, tabs, commas and line ends): a scan of the bytes that keeps nothing.
  static func onlyAddresses(_ text: String) -> Bool {
    var text = text
    return text.withUTF8 { bytes in
      var sawWord = false
      var end = 0
      while end < bytes.count {
        guard !isSeparator(bytes[end]), !isLineEnd(bytes[end]) else { end += 1; continue }
        let start = end
        while end < bytes.count, !isSeparator(bytes[end]), !isLineEnd(bytes[end]) { end += 1 }
        let word = UnsafeBufferPointer(rebasing: bytes[start..<end])
        guard ReportText.plainHexNumber(word) != nil
                || ReportText.hexNumber(String(decoding: word, as: UTF8.self)) != nil else { return false }
        sawWord = true
      }
      return sawWord
    }
  }

  /// How many words of `lines` read as addresses, stopping once past `limit` (a scan that keeps nothing).
  static func countAddresses(_ lines: [String], upTo limit: Int) -> Int {
    var count = 0
    for line in lines {
      var line = line
      line.withUTF8 { bytes in
        var end = 0
        while end < bytes.count, count <= limit {
          guard !isSeparator(bytes[end]) else { end += 1; continue }
          let start = end
          while end < bytes.count, !isSeparator(bytes[end]) { end += 1 }
          if ReportText.plainHexNumber(UnsafeBufferPointer(rebasing: bytes[start..<end])) != nil { count += 1 }
        }
      }
      if count > limit { break }
    }
    return count
  }

  static func parse(_ lines: [String], images: [ReportImage]) throws(ReportError) -> ProcessSnapshot? {
    // Whether there is any image, before any frame is kept (lines with a space or `+` only).
    // (Addresses alone and no image were refused before the lines were split: `onlyAddresses`.)
    guard !images.isEmpty || lines.contains(where: { formatterImage($0) != nil }) else { return nil }
    // Counted first, so a list too long to keep is refused before it is kept.
    let maximum = ReportText.maximumFrames
    let addressCount = countAddresses(lines, upTo: maximum)
    if addressCount > maximum {
      throw ReportError("more than \(maximum) addresses: symbolicate them in parts (the limit bounds memory)")
    }
    var report = ProcessSnapshot(format: .addresses, images: images, document: ReportDocument(lines: lines))
    var frames: [ReportFrame] = []
    var wordProblems: [String] = []
    // Exactly the frames there will be: growing by doubling would hold the old and the new storage at once,
    // one and a half times the frames, at the peak of a long list.
    frames.reserveCapacity(addressCount)
    for (lineIndex, line) in lines.enumerated() {
      var line = line
      // Words on bytes, addresses read without making a string.
      func readWords(_ bytes: UnsafeBufferPointer<UInt8>) {
        var end = 0
        while end < bytes.count {
          // Words are separated by spaces, tabs and commas (empty words are skipped).
          guard !isSeparator(bytes[end]) else { end += 1; continue }
          let start = end
          while end < bytes.count, !isSeparator(bytes[end]) { end += 1 }
          let wordBytes = UnsafeBufferPointer(rebasing: bytes[start..<end])
          var address = ReportText.plainHexNumber(wordBytes)
          if address == nil {  // the slow path: signs, non-ASCII, or not an address at all
            let word = String(decoding: wordBytes, as: UTF8.self)
            address = ReportText.hexNumber(word)
            if address == nil { wordProblems.append("line \(lineIndex + 1): '\(word.prefix(40))' is not an address") }
          }
          guard let address else { continue }
          frames.append(ReportFrame(number: frames.count, address: address, isReturnAddress: false,
                                    position: ProcessSnapshot.Position(line: lineIndex)))
        }
      }
      // Most lines of a long address list are one address: no space or `+`, so not an image line.
      let done = line.withUTF8 { bytes in
        guard !bytes.contains(where: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "+") }) else { return false }
        readWords(bytes)
        return true
      }
      if done { continue }
      if let image = formatterImage(line) {
        report.images.append(image)
        continue
      }
      line.withUTF8 { readWords($0) }
    }
    guard !frames.isEmpty, !report.images.isEmpty else { return nil }
    report.threads = [ReportThread(number: 0, crashed: true, frames: frames)]
    // The thread holds the only reference from here on: `placeFrames` then fills the frames in place
    // (the local's reference lasts to the end of scope, and a second one makes the first change copy all).
    frames = []
    report.problems = Array(wordProblems.prefix(20))
    if wordProblems.count > 20 { report.problems.append("\(wordProblems.count - 20) more words that are not addresses") }
    report.placeFrames()
    return report
  }

  static func isLineEnd(_ byte: UInt8) -> Bool { byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") }

  static func isSeparator(_ byte: UInt8) -> Bool {
    byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: ",")
  }

  /// One image line of imagelog's formatter (crash, logger or unstrip style), or `nil`.
  static func formatterImage(_ line: String) -> ReportImage? {
    // Most lines of a long address list are addresses: decide without allocating.
    guard line.utf8.contains(where: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "+") }) else { return nil }
    let text = line.trimmingSpaces
    if text.hasPrefix("Added: ") || text.hasPrefix("Removed: ") { return loggerImage(text) }
    if text.hasPrefix("0x"), text.contains(" - "), text.contains("<"), let image = AppleCrashParser.binaryImage(text) {
      return image
    }
    if text.hasPrefix("0x"), let plus = text.firstIndex(of: "+"), text[..<plus].allSatisfy({ !$0.isWhitespace }) {
      return unstripImage(text)
    }
    return nil
  }

  /// `Added: 0x7fd77d1a8000 (0x3fbe0) /opt/swift/usr/lib/swift/linux/libswiftSwiftOnoneSupport.so <69B6BDCC-...>`
  static func loggerImage(_ text: String) -> ReportImage? {
    let words = text.split(separator: " ", maxSplits: 3)
    guard words.count == 4, let load = ReportText.hexNumber(words[1]),
          words[2].hasPrefix("("), words[2].hasSuffix(")"), let size = ReportText.hexNumber(words[2].dropFirst().dropLast())
    else { return nil }
    var rest = Substring(words[3])
    var identity: ImageIdentity?
    if rest.hasSuffix(">"), let open = rest.lastIndex(of: "<") {
      identity = ImageIdentity(rest[rest.index(after: open)..<rest.index(before: rest.endIndex)])
      rest = rest[..<open]
    }
    let path = rest.trimmingSpaces
    guard !path.isEmpty else { return nil }
    return ReportImage(name: Image.shortName(of: path), path: path, loadAddress: load,
                       endAddress: size > 0 ? load &+ (size - 1) : nil, identity: identity, architecture: nil)
  }

  /// `0x55f9cfda6000+0x60000 4e03921f...@0x55f9cfda6318 /path/file - /path/module` (eu-unstrip -n).
  static func unstripImage(_ text: String) -> ReportImage? {
    let words = text.split(separator: " ")
    guard words.count >= 3 else { return nil }
    let span = words[0].split(separator: "+")
    guard span.count == 2, let start = ReportText.hexNumber(span[0]), let size = ReportText.hexNumber(span[1]) else { return nil }
    let idText = words[1].split(separator: "@").first ?? ""
    let identity = idText == "-" ? nil : ImageIdentity(idText)
    guard identity != nil || idText == "-" else { return nil }
    let module = words.count >= 5 ? String(words[4]) : nil
    let file = String(words[2])
    let path = module.flatMap { $0.hasPrefix("/") ? $0 : nil } ?? (file.hasPrefix("/") ? file : nil)
    return ReportImage(name: Image.shortName(of: path ?? module ?? file), path: path, loadAddress: start,
                       endAddress: size > 0 ? start &+ (size - 1) : nil, identity: identity, architecture: nil)
  }
}
