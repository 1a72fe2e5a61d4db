import ProcessInspection
import ImageReaders
import Snapshot
import SnapshotSources
import Symbolication
import SnapshotFormatting

func explain(pid: Int32, reportText: String) throws {
  var snapshot = try ProcessSnapshot.capture(pid: pid).snapshot   // every thread stopped at once, then let go
  // The other sources give the same model:
  //   ProcessSnapshot.core(try CoreDump(path: "core.1234")).snapshot
  //   try ProcessSnapshot.minidump(try FileBytes(path: "crash.dmp"))   // its threads walked by symbolicate
  //   try ReportParser.parse(reportText)      // .crash, .ips, Swift, sanitizers, coredumpctl, Android, glibc
  var options = SymbolicationOptions()
  options.symbolStores = ["/srv/symbols"]     // Breakpad .sym files for images whose files are gone
  Symbolicator.symbolicate(&snapshot, options: options)   // by build-id/UUID, never by name
  for thread in snapshot.threads where thread.number == 0 {
    for frame in thread.frames {
      print(frame.number, frame.symbols.function?.name ?? "???", frame.symbols.function?.line ?? 0)
    }
  }
  print(snapshot.formatted(.report))          // imagelog's report; .json and Apple's .crash too
  let dump = try snapshot.minidumpBytes()     // a minidump minidump-stackwalk and Sentry read
  print(dump.count)
}
