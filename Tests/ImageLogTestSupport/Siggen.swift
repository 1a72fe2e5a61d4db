#if canImport(Glibc)
import Glibc
#endif

/// Mozilla's siggen (PyPI `siggen`, Socorro's signature generation), which Scripts/install-test-tools
/// puts in `pipelineToolsDirectory/python`: the oracle of imagelog's crash signatures, run with its
/// own lists (read from the installed package, never copied into the repository).
public enum Siggen {
  /// The folder siggen and its dependencies were installed into (`pip install --target`).
  public static let pythonPath = pipelineToolsDirectory + "/python"
  /// siggen's own signature lists, in the installed package.
  public static let listDirectory = pythonPath + "/siggen/siglists"
  /// True when siggen and python3 are there (else the tests skip, saying so).
  public static let isInstalled = access(pythonPath + "/siggen/cmd_signify.py", R_OK) == 0 && haveTool("python3")
  public static let skipReason = "needs siggen (Scripts/install-test-tools) and python3"

  /// `signify` on `json` (a processed crash, `{"json_dump": ...}`, or siggen's crash data) with the
  /// lists in `lists`: its JSON answer (`signature`, `proto_signature`, `notes`).
  public static func signify(_ json: String, lists: String = listDirectory) throws -> String {
    let run = try runChild(["python3", "-c", "import sys; from siggen.cmd_signify import main; sys.exit(main())",
                            "--signature-list-dir", lists],
                           environment: ["PYTHONPATH": pythonPath, "PYTHONDONTWRITEBYTECODE": "1"], input: json, timeoutSeconds: 120)
    guard run.exitCode == 0 else { throw TestSupportError("signify failed: \(run.error)") }
    return run.output
  }
}
