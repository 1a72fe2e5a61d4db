import Glibc

/// Tests/Programs/unloaded-plugin.c built as a shared library (a SHA-1 build-id) into `directory`, with
/// its build-id as `readelf -n` prints it: the plugin the "unloaded" crash modes close and then call.
public struct UnloadedPlugin: Sendable {
  /// The library's path.
  public var path: String
  /// `Build ID:` of `readelf -n` (lowercase hex).
  public var buildID: String
  /// Tests/Programs/unloaded-other.c built beside it (`libother.so`): the library the "replaced" modes
  /// load where the plugin was.
  public var other: String

  /// Builds the plugin with `compiler` and reads its build-id with `readelf`.
  public static func build(in directory: String, compiler: String, readelf: String) throws -> UnloadedPlugin {
    let path = directory + "/libplugin.so"
    let built = try runChild([compiler, "-shared", "-fPIC", "-Wl,--build-id=sha1",
                              packageRoot + "/Tests/Programs/unloaded-plugin.c", "-o", path])
    guard built.exitCode == 0 else { throw TestSupportError("cc failed: \(built.error)") }
    let other = directory + "/libother.so"
    let builtOther = try runChild([compiler, "-shared", "-fPIC", "-Wl,--build-id=sha1",
                                   packageRoot + "/Tests/Programs/unloaded-other.c", "-o", other])
    guard builtOther.exitCode == 0 else { throw TestSupportError("cc failed: \(builtOther.error)") }
    let notes = try runChild([readelf, "-n", path])
    guard let line = notes.output.split(separator: "\n").first(where: { $0.contains("Build ID:") }),
          let id = line.split(separator: " ").last else {
      throw TestSupportError("readelf -n shows no build-id: \(notes.output)")
    }
    return UnloadedPlugin(path: path, buildID: String(id), other: other)
  }
}
