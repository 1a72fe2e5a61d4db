import Glibc

/// imagelog's crash document schema (`Schemas/imagelog-crash.schema.json`) and a real validator for it:
/// Debian's python3-jsonschema (Draft 2020-12), run by /usr/bin/python3 (a `python3` earlier on PATH may
/// be another one without the module). Every test that writes a crash in JSON checks it here.
public enum CrashDocumentSchema {
  /// The schema file in the checkout.
  public static let path = "\(packageRoot)/Schemas/imagelog-crash.schema.json"

  static let python = "/usr/bin/python3"

  /// Why documents cannot be validated here (no /usr/bin/python3 or no jsonschema module: install
  /// python3-jsonschema, Scripts/install-test-tools does), else `nil`.
  public static let unavailableReason: String? = {
    guard access(python, X_OK) == 0 else { return "\(python) is missing (Debian's python3)" }
    guard let probe = try? runChild([python, "-c", "import jsonschema"]), probe.exitCode == 0 else {
      return "\(python) has no jsonschema module (apt install python3-jsonschema)"
    }
    return nil
  }()

  // Reads one or more documents one after another (a file of several reports writes one each) and
  // prints each error as `document N: PATH: MESSAGE`; the schema itself is checked first.
  static let script = """
    import json, sys, jsonschema
    schema = json.load(open(sys.argv[1]))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    text = sys.stdin.read()
    decoder = json.JSONDecoder()
    position, count = 0, 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            break
        document, position = decoder.raw_decode(text, position)
        for error in validator.iter_errors(document):
            print("document %d: %s: %s" % (count, "/".join(str(p) for p in error.absolute_path), error.message[:300]))
        count += 1
    if count == 0:
        print("no JSON document")
    """

  /// What the validator finds wrong with the JSON document(s) in `output`, one line each; empty when
  /// every document is valid. Throws when the validator cannot run or `output` is not JSON.
  public static func problems(_ output: String) throws -> [String] {
    if let unavailableReason { throw TestSupportError(unavailableReason) }
    let result = try runChild([python, "-c", script, path], input: output)
    guard result.exitCode == 0 else { throw TestSupportError("jsonschema failed: \(result.error)") }
    return result.output.split(separator: "\n").map(String.init)
  }
}
