#if canImport(Glibc)
internal import Glibc
#endif
import ImageLog

/// `imagelog crashes DIR`: what a crash folder holds and where each report is on its way to a server.
struct CrashesCommand: Command {
  static let name = "crashes"
  static let abstract = "List the crashes in a crash folder and whether each waits to be sent, was sent or was refused."
  static let usage = "imagelog crashes [--format text|json] <dir>"
  static let helpSections = """
    ARGUMENTS:
      <dir>                   A crash folder (run --crash-dir, core-handler --output-dir).

    OPTIONS:
      --format <style>        text (one line per crash: STATE NAME FILES DETAIL) or json
                              (schema imagelog.crashes, version 1).
      -h, --help              Show help information.

    STATES:
      incomplete   still being written (a provisional report, or the minidump not there yet)
      waiting      to be sent by 'imagelog upload'; after a failure, with its reason and the time
                   of the next attempt
      uploading    an 'imagelog upload' is sending it now
      sent         a server took it; its crash id is kept
      rejected     a server refused it (HTTP 4xx); the reason is kept, it is not sent again
      no-minidump  a report without a minidump: kept, never sent
    """

  var folder: String
  var json: Bool

  init(_ scanner: inout ArgumentScanner) throws(UsageError) {
    let format = try scanner.option("--format") ?? "text"
    guard format == "text" || format == "json" else {
      throw scanner.usageError("The value '\(format)' is invalid for '--format <style>' (text or json)")
    }
    json = format == "json"
    let rest = try scanner.positionals()
    guard rest.count == 1, let path = rest.first else { throw scanner.usageError("Expected one <dir>") }
    folder = path
  }

  func run() throws -> ExitStatus {
    let database: CrashDatabase
    do { database = try CrashDatabase(existing: folder) } catch {
      printError("imagelog: \(error)")
      return .failure
    }
    let reports = database.reports(now: Int64(time(nil)))
    if json { printOutput(CrashDatabase.listingJSON(reports, folder: folder)) } else { writeOutput(CrashDatabase.listingText(reports)) }
    return .success
  }
}
