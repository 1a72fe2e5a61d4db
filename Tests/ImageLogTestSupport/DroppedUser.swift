import Glibc
import Testing

/// What a test running as root puts before a command to run it as a user without root's access: user and
/// group 65534 (nobody), no supplementary groups (`setpriv`, util-linux).
public let droppedUserPrefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

/// Why user 65534 (through `droppedUserPrefix`) cannot run `command` (status 0 wanted) or read each of
/// `files`, or nil when it can. Asked of the kernel by doing it as that user: every folder above a file
/// must let it in, which a checkout under a `mktemp -d` folder (mode 0700) does not. (setpriv keeps
/// root's capabilities until it execs the command, so the command itself starts wherever it lies;
/// what it then opens is what fails.)
public func droppedUserProblem(running command: [String], reading files: [String] = []) -> String? {
  guard haveTool("setpriv") else { return "setpriv (util-linux) is not installed" }
  guard let run = try? runChild(droppedUserPrefix + command), run.exitCode == 0 else {
    return "user 65534 cannot run \(command.joined(separator: " "))"
  }
  for path in files {
    guard let test = try? runChild(droppedUserPrefix + ["test", "-r", path]), test.exitCode == 0 else {
      return "user 65534 cannot read \(path): a folder above it is closed to that user"
    }
  }
  return nil
}

extension Trait where Self == ConditionTrait {
  /// Enables a test that, as root, runs a command as user 65534 (`droppedUserPrefix`), when that user can
  /// run `command` and read `files`; a test not run as root drops nothing and is enabled. A checkout
  /// under a folder that user cannot enter (a `mktemp -d` folder is 0700) skips the test, saying so.
  public static func droppedUserReaches(running command: [String], reading files: [String] = []) -> Self {
    let what = (["run " + command.joined(separator: " ")] + files.map { "read " + $0 }).joined(separator: " and ")
    return .enabled(Comment(rawValue: "runs as root dropped to user 65534 with setpriv (util-linux), which must be able to \(what)"
                                      + ": every folder above them must let that user in (a mktemp -d folder, mode 0700, does not)")) {
      geteuid() != 0 || droppedUserProblem(running: command, reading: files) == nil
    }
  }
}
