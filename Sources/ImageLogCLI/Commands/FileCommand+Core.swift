import ImageLog
import ImageReaders
import Snapshot
import SnapshotSources

extension FileCommand {
  /// A core file's images in the chosen style: the crash style's Binary Images lines, `eu-unstrip -n
  /// --core`'s lines, one JSON object per image (as `imagelog pid --format json`), or the detailed view
  /// (the process, its signal and threads, then the images' crash lines). A file on disk that cannot
  /// stand in for what the core left out (changed since: another build-id) is one line on standard
  /// error; the images are still listed, with the build-ids the core holds.
  func reportCore(_ dump: CoreDump, path: String) -> FileReport {
    var report = FileReport()
    let (images, problems) = dump.images()
    for problem in problems { report.lines.append(.error("imagelog: \(path): \(problem)")) }
    return reportImages(images, path: path, architecture: dump.core.architecture, into: report) {
      Self.coreDetails(dump.core, path: path, images: images, source: dump.imageSource)
    }
  }

  /// A minidump's modules in the chosen style, as a core's images are listed: each module where the
  /// dump says it was mapped, with its build-id (its text range is its whole span: the dump does not
  /// say where its code ends).
  func reportMinidump(_ snapshot: ProcessSnapshot, path: String) -> FileReport {
    var report = FileReport()
    for problem in snapshot.problems { report.lines.append(.error("imagelog: \(path): \(problem)")) }
    let images = snapshot.images.compactMap(\.loaded)
    return reportImages(images, path: path, architecture: snapshot.process.architecture ?? "???", into: report) {
      Self.minidumpDetails(snapshot, path: path, images: images)
    }
  }

  /// The images of a core or a minidump in the chosen style; `details` makes the detailed view.
  func reportImages(_ images: [Image], path: String, architecture fileArchitecture: String, into given: FileReport,
                    details: () -> String) -> FileReport {
    var report = given
    if printEntitlements {
      report.fail("imagelog: \(path): entitlements are stored only in Mach-O code signatures")
      return report
    }
    if let architecture, Architecture(commandLine: architecture) != Architecture(commandLine: fileArchitecture) {
      report.fail("imagelog: \(path): no slice for architecture \(architecture) (has \(fileArchitecture))")
      return report
    }
    if printUUIDs {
      for image in images {
        guard let buildID = image.buildID else { continue }
        report.lines.append(.output(BinaryFormatter.uuidLine(buildID, architecture: image.architecture, path: image.path)))
      }
      return report
    }
    switch style {
    case .crash, .unstrip:
      let formatter = ImageFormatter(style: style == .crash ? .crash : .unstrip)
      for image in images { report.lines.append(.output(formatter.format(image))) }
    case .json:
      let formatter = ImageFormatter(style: .json)
      for image in images { report.lines.append(.jsonElement(Array(formatter.format(image).utf8))) }
    case .detailed:
      report.lines.append(.output(details()))
    }
    return report
  }

  /// The detailed view of a minidump: what it says about the process and the system, then its modules.
  static func minidumpDetails(_ snapshot: ProcessSnapshot, path: String, images: [Image]) -> String {
    var lines = ["\(path):", "  file type:     minidump", "  architecture:  \(snapshot.process.architecture ?? "???")"]
    if let name = snapshot.process.name { lines.append("  process:       \(name) [\(snapshot.process.pid.map(String.init) ?? "?")]") }
    if let os = snapshot.process.osVersion { lines.append("  os:            \(os)") }
    if let exception = snapshot.exception, exception.isDumpRequested {
      lines.append("  exception:     none: \(exception.reason ?? "the dump was requested") (a dump requested, nothing crashed)")
    } else if let exception = snapshot.exception, let reason = exception.reason {
      lines.append("  exception:     \(reason), address 0x\(hexDigits(exception.address, width: 16))")
    } else if let exception = snapshot.exception {
      lines.append("  signal:        signal \(exception.signal), code \(exception.code), address 0x\(hexDigits(exception.address, width: 16))")
    } else {
      lines.append("  signal:        none (a dump of a process that did not crash)")
    }
    let tids = snapshot.threads.map { $0.tid.map(String.init) ?? "?" }.joined(separator: " ")
    lines.append("  threads:       \(snapshot.threads.count) (\(tids))")
    lines.append("  images:        \(images.count) (from the ModuleList stream)")
    let escaped = lines.map(TextEscaping.escaped)
    let formatter = ImageFormatter(style: .crash)
    var modules: [String] = []
    for (index, image) in images.enumerated() {
      modules.append("    " + formatter.format(image))
      // The identity a symbol store files the module under, as the dump's CodeView record gives it.
      guard index < snapshot.images.count else { continue }
      let module = snapshot.images[index]
      let parts = [module.debugFileName.map { "debug file \($0)" }, module.debugID.map { "debug id \($0)" },
                   module.codeID.map { "code id \($0)" }].compactMap { $0 }
      if !parts.isEmpty { modules.append("      " + TextEscaping.escaped(parts.joined(separator: ", "))) }
    }
    return (escaped + modules).joined(separator: "\n")
  }

  /// The detailed view of a core: what its notes say about the process, then its images.
  static func coreDetails(_ core: ELFCore, path: String, images: [Image], source: ELFCoreImageSource) -> String {
    var lines = ["\(path):", "  file type:     core", "  architecture:  \(core.architecture)"]
    if let process = core.process {
      lines.append("  process:       \(process.name) [\(process.pid)]")
      if !process.arguments.isEmpty { lines.append("  arguments:     \(process.arguments)") }
    }
    if let signal = core.signal {
      var text = "signal \(signal)"
      if let info = core.signalInfo {
        text += ", code \(info.code)"
        if let address = info.faultAddress { text += ", address 0x\(hexDigits(address, width: 16))" }
      }
      lines.append("  signal:        \(text)")
    } else {
      lines.append("  signal:        none (a core of a live process)")
    }
    let tids = core.threads.map { String($0.tid) }.joined(separator: " ")
    lines.append("  threads:       \(core.threads.count) (\(tids))")
    let missing = core.segments.filter { $0.availableSize < $0.vmRange.upperBound - $0.vmRange.lowerBound }.count
    lines.append("  segments:      \(core.segments.count) (\(missing) not or not wholly in the core)")
    switch source {
    case .fileNote: lines.append("  images:        \(images.count) (from NT_FILE)")
    case .linkMap: lines.append("  images:        \(images.count) (from the dynamic linker's link_map list: no NT_FILE)")
    }
    let escaped = lines.map(TextEscaping.escaped)
    let formatter = ImageFormatter(style: .crash)
    return (escaped + images.map { "    " + formatter.format($0) }).joined(separator: "\n")
  }
}
