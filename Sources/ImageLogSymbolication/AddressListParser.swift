/// Bare addresses (`0x7f3a1c2013a4`, one or more per line) to be resolved in the images given on the
/// command line with `--image PATH@LOADADDR`.
enum AddressListParser {
  static func parse(_ lines: [String], images: [CrashReport.Image]) -> CrashReport? {
    var report = CrashReport(format: .addresses, lines: lines, images: images)
    report.threads = [CrashReport.Thread(number: 0, crashed: true, name: nil)]
    for (lineIndex, line) in lines.enumerated() {
      for word in line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "," }) {
        guard let address = ReportParser.hexNumber(word) else {
          report.problems.append("line \(lineIndex + 1): '\(word.prefix(40))' is not an address")
          continue
        }
        report.frames.append(CrashReport.Frame(thread: 0, index: report.frames.count, address: address, imageIndex: nil,
                                               isReturnAddress: false, line: lineIndex, symbolColumn: nil,
                                               reportedSymbol: nil, ipsThread: nil))
      }
    }
    guard !report.frames.isEmpty else { return nil }
    ReportParser.attachImages(&report, frameImageNames: [:])
    return report
  }
}
