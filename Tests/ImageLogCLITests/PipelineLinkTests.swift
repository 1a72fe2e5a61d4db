import ImageLogTestSupport
import Testing

/// The crash pipeline does not depend on the in-process library (#36): a program linked with the
/// CrashPipeline product's targets (PipelineLinkCheck, as a symbolication service links them) defines no
/// dlopen/dlmopen/dlclose/pthread_create interposer and none of the crash handler's or the observers'
/// functions, while imagelog, which links ImageLog, defines them all (so the names are the right ones).
/// SwiftPM links every object of every target a program depends on, used or not: a PipelineLinkCheck
/// made to depend on ImageLog as well defines all of them (checked by hand when this test was written).
@Suite struct PipelineLinkTests {
  static let inProcess = ["dlopen", "dlmopen", "dlclose", "pthread_create", "il_crash_install",
                          "il_crash_write_report", "il_set_loader_hook", "il_gate_publish"]

  /// The functions `path` defines, by `nm --defined-only`.
  static func definedFunctions(_ path: String) throws -> Set<String> {
    let nm = try #require(which("nm"), "nm (binutils) is not on PATH")
    let run = try runTool([nm, "--defined-only", path])
    try #require(run.status == 0, "nm \(path) failed: \(run.error)")
    return Set(run.output.split(separator: "\n").compactMap { line -> String? in
      let fields = line.split(separator: " ")
      guard fields.count == 3, ["T", "t", "W", "w"].contains(fields[1]) else { return nil }
      return String(fields[2])
    })
  }

  @Test func thePipelineLinksNoInterposerAndNoCrashHandler() throws {
    let pipeline = try Self.definedFunctions(builtProduct("PipelineLinkCheck"))
    let imagelog = try Self.definedFunctions(builtProduct("imagelog"))
    for name in Self.inProcess {
      #expect(imagelog.contains(name), "imagelog does not define \(name): the name list is stale")
      #expect(!pipeline.contains(name), "a program linking the CrashPipeline targets defines \(name)")
    }
    // What it does link: the other-process C (CImageLogProcess) and the pipeline's own code.
    #expect(pipeline.contains("il_read_process_memory"))
    #expect(pipeline.contains { $0.contains("13Symbolication") } && pipeline.contains { $0.contains("18SnapshotFormatting") })
  }
}
