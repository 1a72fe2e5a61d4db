#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog
import Symbolication
import ImageReaders
import Snapshot
import SnapshotFormatting
import SnapshotSources

/// `imagelog symbolicate CORE`: the dead process's snapshot (its threads unwound in the core's memory),
/// symbolicated as any report is and written in imagelog's crash-report layout (README.md's "Crash reports").
extension SymbolicateCommand {
  /// A core: the dead process's snapshot, symbolicated as any report is, in imagelog's layout.
  func runCore(_ path: String, options: SymbolicationOptions) -> ExitStatus {
    let dump: CoreDump
    do { dump = try CoreDump(path: path) } catch {
      printError("imagelog: \(path): \(error)")
      return .failure
    }
    var (snapshot, problems) = ProcessSnapshot.core(dump)
    for problem in problems { printError("imagelog: \(path): \(problem)") }
    return writeSymbolicated(&snapshot, options: options, locator: Symbolicator.locator(forOneReport: options))
  }

  /// A minidump: its threads unwound through its memory with the call frame information of its modules'
  /// files (found by build-id), then symbolicated as any report is, in imagelog's layout.
  func runMinidump(_ path: String, options: SymbolicationOptions) -> ExitStatus {
    var snapshot: ProcessSnapshot
    let memory: MinidumpMemory
    do {
      (snapshot, memory) = try ProcessSnapshot.minidump(try FileBytes(path: path))
    } catch {
      printError("imagelog: \(path): \(error)")
      return .failure
    }
    // What could not be read (a stream past the end, a lying count) is said, as for a core and `file DUMP`.
    for problem in snapshot.problems { printError("imagelog: \(path): \(problem)") }
    let locator = Symbolicator.locator(forOneReport: options)
    Symbolicator.walkStacks(&snapshot, memory: memory, locator: locator)
    return writeSymbolicated(&snapshot, options: options, locator: locator)
  }

  /// Symbolicates a snapshot (unless `--no-symbolicate`) and writes it in the chosen style: imagelog's
  /// layout (the crash style of its own layout is that layout), JSON or minidump-stackwalk's JSON.
  func writeSymbolicated(_ snapshot: inout ProcessSnapshot, options: SymbolicationOptions,
                         locator: DebugFileLocator) -> ExitStatus {
    var status = ExitStatus.success
    if !(noSymbolicate && style == .report) {
      for path in options.searchPaths + options.symbolStores where !ReportReading.exists(path) {
        printError("imagelog: \(path): no such file or directory")
        status = .failure
      }
    }
    writeSnapshot(&snapshot, style: style == .crash ? .report : style, symbolicate: !noSymbolicate, options: options,
                  locator: locator)
    return status
  }
}
