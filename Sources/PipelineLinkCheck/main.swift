// A program linked with the CrashPipeline product's targets only, as a symbolication service would link
// them: PipelineLinkTests reads its symbol table with nm to show that no dlopen/pthread_create interposer
// and no crash handler came with them. It symbolicates the report files it is given and prints each.
import ProcessInspection
import Snapshot
import SnapshotFormatting
import SnapshotSources
import Symbolication

for path in CommandLine.arguments.dropFirst() {
  do {
    var snapshot = try ReportParser.parse(try ReportReading.readText(path))
    Symbolicator.symbolicate(&snapshot, options: SymbolicationOptions())
    print(snapshot.formatted(.report))
  } catch {
    print("\(path): \(error)")
  }
}
