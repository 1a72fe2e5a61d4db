@testable import Snapshot
@testable import SnapshotFormatting
@testable import SnapshotSources
@testable import Symbolication
import Testing

/// A frame line's part before the symbol column, as `symbolicate` rewrites it in place: the first
/// `column` Characters, padded with spaces to `column`. Its byte-wise shortcut for ASCII must agree
/// with Characters everywhere, also where what follows the column combines with it.
@Suite struct PaddedPrefixTests {
  @Test func byteShortcutAgreesWithCharacters() {
    let pieces = ["a", " ", "0x1f", "é", "e\u{301}", "\u{301}", "\r", "\n", "\r\n", "漢", "🙂", "\u{200D}", "ä"]
    var lines = [""]
    for first in pieces { for second in pieces { for third in pieces { lines.append("ab " + first + second + third + "xy") } } }
    var compared = 0
    for line in lines {
      for column in 0...(line.count + 3) {
        let head = String(line.prefix(column))
        let expected = head + String(repeating: " ", count: max(0, column - head.count))
        #expect(ProcessSnapshot.paddedPrefix(line, column) == expected, "\(line.debugDescription) column \(column)")
        compared += 1
      }
    }
    #expect(compared > 20_000)
  }
}
