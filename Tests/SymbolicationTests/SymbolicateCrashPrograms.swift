import Glibc
import ImageLogTestSupport
import Testing

/// The crash test program (Tests/Programs/symbolicate-crasher.swift with a C helper), compiled once
/// per test run with swiftc and crashed in different ways by its first argument.
enum CrashPrograms {
  /// The crash modes the program knows.
  static let modes = ["index", "fatal", "unwrap", "null"]

  static let haveCompilers = haveTool("swiftc") && haveTool("clang")

  /// The built program's path (in a temporary folder), or the error that stopped the build.
  static let crasher: Result<String, TestSupportError> = {
    do {
      let directory = try makeTemporaryDirectory()
      let programs = packageRoot + "/Tests/Programs"
      let object = directory + "/symbolicate-helper.o"
      let clang = try runChild(["clang", "-g", "-O0", "-c", programs + "/symbolicate-helper.c", "-o", object])
      guard clang.status == 0 else { return .failure(TestSupportError("clang: \(clang.error)")) }
      let path = directory + "/symbolicate-crasher"
      let swiftc = try runChild(["swiftc", "-g", "-Onone", "-import-objc-header", programs + "/symbolicate-helper.h",
                                   programs + "/symbolicate-crasher.swift", object, "-o", path])
      guard swiftc.status == 0 else { return .failure(TestSupportError("swiftc: \(swiftc.error)")) }
      return .success(path)
    } catch let error as TestSupportError {
      return .failure(error)
    } catch {
      return .failure(TestSupportError("\(error)"))
    }
  }()

  /// Crashes the program in `mode` with Swift's backtracer set to `symbolicate` (`off` or `full`) and
  /// returns what the backtracer wrote.
  static func crash(_ mode: String, symbolicate: String) throws -> String {
    let path = try crasher.get()
    let result = try runChild([path, mode], environment: [
      "SWIFT_BACKTRACE": "enable=yes,interactive=no,symbolicate=\(symbolicate),color=no",
    ])
    guard result.signal != nil else { throw TestSupportError("\(mode): the program did not crash (status \(result.status))") }
    return result.error
  }

  /// One frame of the crashed thread as the backtracer printed it with `symbolicate=full`.
  struct ExpectedFrame: Equatable, CustomStringConvertible {
    var index: Int
    var name: String
    var offset: Int
    var location: String?
    var description: String { "\(index) \(name) + \(offset)\(location.map { " at " + $0 } ?? "")" }
  }

  /// The crashed thread's frames from backtracer output in `symbolicate=full` style:
  /// `  1 [ra] 0x00007f… NAME + 302 in IMAGE at FILE:LINE:COLUMN`.
  static func crashedThreadFrames(_ text: String) -> [ExpectedFrame] {
    var frames: [ExpectedFrame] = []
    var inCrashed = false
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
      if line.hasPrefix("Thread ") { inCrashed = line.hasSuffix("crashed:"); continue }
      guard inCrashed else { continue }
      if line.isEmpty || line.hasPrefix("Registers") { if !frames.isEmpty { break } else { continue } }
      let words = line.split(separator: " ", omittingEmptySubsequences: true)
      guard let index = words.first.flatMap({ Int($0) }),
            let addressIndex = words.firstIndex(where: { $0.hasPrefix("0x") }) else { continue }
      let rest = words[(addressIndex + 1)...].joined(separator: " ")
      guard let plus = rest.firstRange(of: " + "), let inRange = rest[plus.upperBound...].firstRange(of: " in ") else { continue }
      let name = String(rest[..<plus.lowerBound])
      let offset = Int(rest[plus.upperBound..<inRange.lowerBound]) ?? -1
      let location = rest.firstRange(of: " at ").map { String(rest[$0.upperBound...]) }
      frames.append(ExpectedFrame(index: index, name: name, offset: offset, location: location))
    }
    return frames
  }
}
