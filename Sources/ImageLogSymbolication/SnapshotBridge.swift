import ImageLog
import ImageReaders

// Transitional: symbolication still works on `CrashReport`; a snapshot is flattened into one, and the
// answers are put back into the snapshot's frames and images. Goes when Symbolicator takes snapshots.
extension ProcessSnapshot {
  /// The snapshot as the flat report symbolication reads (no lines: the snapshot's writers lay it out).
  package func flatReport() -> CrashReport {
    var report = CrashReport(format: CrashReport.Format(rawValue: format.rawValue) ?? .imagelog)
    report.architecture = process.architecture
    report.threadCount = process.threadCount
    report.images = images.map(\.reportImage)
    for thread in threads {
      report.threads.append(CrashReport.Thread(number: thread.number, crashed: thread.crashed, name: thread.name,
                                               tid: thread.tid, state: thread.state, problem: thread.problem,
                                               registers: thread.registers))
      for frame in thread.frames {
        var entry = CrashReport.Frame(thread: thread.number, index: frame.number, address: frame.address,
                                      imageIndex: frame.imageIndex, isReturnAddress: frame.isReturnAddress, line: nil,
                                      symbolColumn: nil, reportedSymbol: frame.reportedSymbol, ipsThread: nil)
        entry.trust = frame.markedTrust?.rawValue
        report.frames.append(entry)
      }
    }
    if report.images.isEmpty { report.problems.append("no Binary Images section: frames cannot be matched to files") }
    return report
  }

  /// Puts `result`'s answers (for `flatReport()`) into the frames and images.
  package mutating func take(_ result: SymbolicatedReport) {
    var flat = 0
    for threadIndex in threads.indices {
      for frameIndex in threads[threadIndex].frames.indices {
        let answer = result.frames[flat]
        var symbols = FrameSymbols()
        symbols.status = switch answer.status {
        case .symbolicated: .symbolicated
        case .noSymbol: .noSymbol
        case .noImage: .noImage
        case .missingImage: .missingImage
        case let .mismatch(reportID, fileID, path): .mismatch(reportID: reportID, fileID: fileID, path: path)
        case .notLookedUp: .notLookedUp
        case .noModule: .noModule
        case .otherBuild: .otherBuild
        }
        symbols.imageName = answer.imageName
        symbols.imageOffset = answer.imageOffset
        symbols.lookupAddress = answer.lookupAddress
        symbols.functions = answer.functions.map {
          FrameSymbols.Function(name: $0.name, rawName: $0.rawName, offset: $0.offset, file: $0.file, line: $0.line,
                                column: $0.column, isInlined: $0.isInlined)
        }
        threads[threadIndex].frames[frameIndex].symbols = symbols
        threads[threadIndex].frames[frameIndex].imageIndex = result.report.frames[flat].imageIndex
        flat += 1
      }
    }
    notes = result.notes
  }
}

extension ProcessSnapshot.Image {
  /// The image as the flat report gives it to the locator.
  package var reportImage: CrashReport.Image {
    var entry = CrashReport.Image(name: name, path: path, loadAddress: loadAddress, endAddress: endAddress,
                                  identity: identity, architecture: architecture)
    entry.offsetsFromLoadBias = offsetsFromLoadBias
    entry.loadAddressFromSymbols = loadAddressFromSymbols
    return entry
  }
}
