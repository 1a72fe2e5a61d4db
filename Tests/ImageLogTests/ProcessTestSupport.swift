import Glibc
import ImageLogTestSupport
import Testing

func processRemoveTree(_ path: String) { _ = try? runTool(["rm", "-rf", path]) }

struct ProcessUnstripModule: Hashable, CustomStringConvertible {
  var start: UInt64
  var size: UInt64
  var buildID: String?
  var buildIDAddress: UInt64?
  var name: String

  var description: String {
    "0x\(String(start, radix: 16))+0x\(String(size, radix: 16)) \(buildID ?? "-")\(buildIDAddress.map { "@0x" + String($0, radix: 16) } ?? "") \(name)"
  }

  static func parse(_ text: String) -> [ProcessUnstripModule] {
    text.split(separator: "\n").compactMap { line in
      let fields = line.split(separator: " ", maxSplits: 4)
      guard fields.count >= 5, let plus = fields[0].firstIndex(of: "+") else { return nil }
      guard let start = UInt64(fields[0][fields[0].index(fields[0].startIndex, offsetBy: 2)..<plus], radix: 16),
            let size = UInt64(fields[0][fields[0].index(plus, offsetBy: 3)...], radix: 16) else { return nil }
      var buildID: String?
      var address: UInt64?
      if fields[1] != "-" {
        let parts = fields[1].split(separator: "@")
        buildID = String(parts[0])
        if parts.count == 2 { address = UInt64(parts[1].dropFirst(2), radix: 16) }
      }
      return ProcessUnstripModule(start: start, size: size, buildID: buildID, buildIDAddress: address, name: String(fields[4]))
    }
  }
}
