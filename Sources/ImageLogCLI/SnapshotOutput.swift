import ImageLog
import Snapshot
import SnapshotFormatting
import Symbolication

/// The one road from a snapshot to standard output, the same for a report, a core, a minidump and a
/// live process: symbolicated (or, with `--no-symbolicate`, only placed in its images), then written in
/// `style`, 64 KiB at a time with write(2) (20,000 lines are neither 20,000 writes nor one giant string).
/// A capture written without symbols, in its own layout, has no summary: it is for symbolicating later.
func writeSnapshot(_ snapshot: inout ProcessSnapshot, style: ReportStyle, symbolicate: Bool, options: SymbolicationOptions,
                   locator: DebugFileLocator? = nil) {
  // Unsymbolicated, a minidump's threads are still walked (symbolication would walk them first).
  if !symbolicate, snapshot.memoryToWalk != nil {
    Symbolicator.walkStacks(&snapshot, locator: locator ?? Symbolicator.locator(forOneReport: options))
  }
  if !symbolicate, style == .report, snapshot.document == nil {
    writeOutput(snapshot.imagelogReportText())
    return
  }
  if !symbolicate {
    Symbolicator.placeWithoutLookingUp(&snapshot)
  } else if let locator {
    Symbolicator.symbolicate(&snapshot, options: options, locator: locator)
  } else {
    Symbolicator.symbolicate(&snapshot, options: options)
  }
  // Socorro's signature, from the symbolicated crashing thread (stackwalk-json's schema has no place for it).
  if style != .stackwalkJSON, snapshot.format != .addresses { snapshot.sign(with: options) }
  if style == .report, snapshot.format == .appleIPS || snapshot.format == .swiftBacktraceJSON {
    // The JSON stays valid: the summary goes to standard error.
    printErrorLines(String(snapshot.summary().drop { $0 == "\n" }))
  }
  var last: UInt8?
  snapshot.write(style) { chunk in
    last = chunk.last
    writeOutput(chunk)
  }
  if last != UInt8(ascii: "\n") { writeOutput("\n") }
  keepUntilExit(snapshot)
}

/// The process ends once the command returns: handing the names of 20,000 frames back to malloc one by
/// one would cost more than writing them did, so the snapshot is left for the exit to reclaim (as
/// compilers do: clang's `-disable-free`).
private func keepUntilExit(_ snapshot: ProcessSnapshot) {
  _ = Unmanaged.passRetained(Retained(snapshot))
}

private final class Retained {
  let value: ProcessSnapshot
  init(_ value: ProcessSnapshot) { self.value = value }
}
