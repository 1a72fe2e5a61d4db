#if canImport(Glibc)
import Glibc
#endif
import ImageLogTestSupport
import ImageReaders
import Snapshot
@testable import Symbolication
import Testing

/// Crash signatures held to Mozilla's siggen (Socorro's generator): generated stacks that exercise each
/// rule, given to imagelog's `Signature` with siggen's own lists (read from the installed package) and
/// to `signify` as siggen's crash data, give the same signature. And imagelog's default lists: compiled
/// in as the files beside them say, and where they differ from siggen's, which rule and why.
@Suite struct SignatureTests {
  typealias Frame = SignatureInput.Frame

  /// siggen's crash data for `input` (what `signify` reads when given no processed crash).
  static func crashData(_ input: SignatureInput) -> String {
    func frame(_ frame: Frame) -> JSONValue {
      var members: [(String, JSONValue)] = [
        ("module", frame.module.map(JSONValue.string) ?? .null), ("function", frame.function.map(JSONValue.string) ?? .null),
        ("file", frame.file.map(JSONValue.string) ?? .null), ("line", frame.line.map { .number(String($0)) } ?? .null),
        ("offset", frame.offset.map(JSONValue.string) ?? .null),
      ]
      if !frame.inlines.isEmpty { members.append(("inlines", .array(frame.inlines.map { Self.inline($0) }))) }
      return .object(members)
    }
    var members: [(String, JSONValue)] = [
      ("crashing_thread", input.crashingThread.map { .number(String($0)) } ?? .null),
      ("threads", .array(input.threads.map { .object([("frames", .array($0.map(frame)))]) })),
    ]
    if let os = input.os { members.append(("os", .string(os))) }
    if let reason = input.reason { members.append(("reason", .string(reason))) }
    if let message = input.abortMessage { members.append(("abort_message", .string(message))) }
    if let size = input.oomAllocationSize { members.append(("oom_allocation_size", .number(String(size)))) }
    if let hang = input.hang { members.append(("hang", .string(hang))) }
    return JSONValue.object(members).serialized()
  }

  static func inline(_ frame: Frame) -> JSONValue {
    .object([("function", frame.function.map(JSONValue.string) ?? .null), ("file", frame.file.map(JSONValue.string) ?? .null),
             ("line", frame.line.map { .number(String($0)) } ?? .null)])
  }

  static func siggenSignature(_ input: SignatureInput) throws -> String {
    let answer = try JSONValue.parse(try Siggen.signify(crashData(input))[...])
    return try #require(answer["signature"]?.string)
  }

  static let siggenLists: SignatureLists? = Siggen.isInstalled ? try? SignatureLists(directory: Siggen.listDirectory) : nil

  /// A stack of named frames in `module`.
  static func stack(_ names: [String?], module: String = "app", os: String = "Linux") -> SignatureInput {
    SignatureInput(threads: [names.enumerated().map { index, name in
      Frame(module: module, function: name, offset: "0x" + hexDigits(0x4010_00 + UInt64(index) * 16, width: 16))
    }], crashingThread: 0, os: os)
  }

  /// Each rule: (what it exercises, the stack).
  static let cases: [(String, SignatureInput)] = {
    var cases: [(String, SignatureInput)] = []
    cases.append(("prefix chain: raise, abort, malloc, memcpy kept up to the first other frame",
                  stack(["raise", "abort", "malloc", "memcpy", "Foo::Bar(int, char const*)", "main"])))
    cases.append(("irrelevant frames skipped (__GI_, KiFastSystemCallRet, std::__)",
                  stack(["__GI___poll", "KiFastSystemCallRet", "std::__throw_bad_alloc()", "mozilla::Foo<int>::Bar(const char*) const", "main"])))
    var unnamed = SignatureInput(threads: [[
      Frame(module: "libc.so.6", offset: "0x00007f0000001000"), Frame(module: "libc.so.6", offset: "0x00007f0000002000"),
      Frame(module: "libfoo.so", offset: "0x00007f0000003000"), Frame(module: "libfoo.so", offset: "0x00007f0000004000"),
      Frame(module: "app", offset: "0x0000000000401000"),
    ]], crashingThread: 0, os: "Linux")
    cases.append(("frames without names: the module, a library's repeats merged", unnamed))
    unnamed.threads = [[Frame(offset: "0x0000000000000000"), Frame(offset: "0x00007ffd12345678"), Frame(module: "[stack]", offset: "0x1")]]
    cases.append(("frames without a module: @0x0 is a prefix, other addresses irrelevant, [module] trimmed", unnamed))
    cases.append(("file#line for a frame with a file and line but no name", SignatureInput(threads: [[
      Frame(module: "app", file: "/src/dir/a.c", line: 12, offset: "0x10"), Frame(module: "app", function: "main", offset: "0x20"),
    ]], crashingThread: 0)))
    cases.append(("line-number functions (js_Interpret:LINE)", SignatureInput(threads: [[
      Frame(module: "libxul.so", function: "js_Interpret", file: "/src/js/Interpreter.cpp", line: 4242, offset: "0x10"),
      Frame(module: "libxul.so", function: "JS_CallFunction", offset: "0x20"),
    ]], crashingThread: 0)))
    cases.append(("Windows module names lowered (and merged)", SignatureInput(threads: [[
      Frame(module: "KERNEL32.DLL", offset: "0x10"), Frame(module: "kernel32.dll", offset: "0x20"),
      Frame(module: "APP.EXE", offset: "0x30"),
    ]], crashingThread: 0, os: "Windows NT")))
    cases.append(("C++ names: templates, parameters, qualifiers, anonymous namespaces, lambdas, cold clones",
                  stack(["std::vector<int, std::allocator<int> >::operator[](unsigned long)"])))
    cases.append(("C++: `anonymous namespace'", stack(["`anonymous namespace'::Baz::qux(int)", "main"])))
    cases.append(("C++: (anonymous namespace), const", stack(["(anonymous namespace)::Foo::bar(int) const"])))
    cases.append(("C++: lambda numbers", stack(["Foo::$_12::operator()() const"])))
    cases.append(("C++: return type and cold clone", stack(["void Foo<int>::bar<char>(int, char*) [clone .cold.222]"])))
    cases.append(("C++: operator", stack(["mozilla::detail::Foo::operator==(Foo const&, Foo const &)"])))
    cases.append(("Rust: hash dropped, generics <T>, sentinel core::panicking::panic_fmt", SignatureInput(threads: [[
      Frame(module: "app", function: "std::panicking::begin_panic_handler::{{closure}}", file: "/rustc/abc/library/std/src/panicking.rs", line: 1, offset: "0x10"),
      Frame(module: "app", function: "core::panicking::panic_fmt::h0123456789abcdef", file: "/rustc/abc/library/core/src/panicking.rs", line: 2, offset: "0x20"),
      Frame(module: "app", function: "<app::Thing<u8> as core::fmt::Debug>::fmt::habcdef0123456789", file: "/src/app/src/main.rs", line: 3, offset: "0x30"),
    ]], crashingThread: 0)))
    cases.append(("inlined frames, each a frame of the walk", SignatureInput(threads: [[
      Frame(module: "app", function: "outer(int)", file: "/src/a.cpp", line: 5, offset: "0x10",
            inlines: [Frame(function: "memcpy", file: "/usr/include/string.h", line: 1), Frame(function: "inner_helper(char*)", file: "/src/a.cpp", line: 3)]),
    ]], crashingThread: 0)))
    var oom = stack(["moz_xmalloc", "Foo::Grow(unsigned long)"])
    oom.oomAllocationSize = 100
    cases.append(("OOM, small", oom))
    oom.oomAllocationSize = 1 << 20
    cases.append(("OOM, large", oom))
    oom.oomAllocationSize = nil
    oom.reason = "STATUS_NO_MEMORY"
    cases.append(("OOM by reason, size unknown", oom))
    cases.append(("OOM by a frame's name", stack(["mozalloc_handle_oom(unsigned long)", "Foo::Grow(unsigned long)"])))
    for message in ["Fatal error: Index out of range: file Swift/ContiguousArrayBuffer.swift, line 600",
                    "###!!! ABORT: nsTArray overflow: file xpcom/ds/nsTArray.cpp:12", "###!!! ABORT: file xpcom/ds/x.cpp:1",
                    "AddressSanitizer: heap-use-after-free \u{1F4A5} on address 0x602000000010 at pc 0x1 bp 0x2 sp 0x3 with a long tail to cut at eighty"] {
      var aborted = stack(["abort", "__assert_fail", "check_things(int)"])
      aborted.abortMessage = message
      cases.append(("abort message: \(message.prefix(30))", aborted))
    }
    var hang = stack(["pthread_cond_wait", "Worker::Wait()"])
    hang.hang = "main"
    cases.append(("hang", hang))
    var overflow = stack(["Recurse(int)"], os: "Windows NT")
    overflow.reason = "EXCEPTION_STACK_OVERFLOW"
    cases.append(("stack overflow", overflow))
    overflow.reason = "EXCEPTION_IN_PAGE_ERROR_READ / STATUS_DEVICE_DATA_ERROR"
    cases.append(("bad hardware", overflow))
    cases.append(("truncated to 255 characters, 40 frames at most",
                  stack((0..<60).map { "memcpy_with_a_rather_long_name_number_\($0)" } + ["main"])))
    cases.append(("whitespace", stack(["Foo::Bar\t(int)  ", "  main"])))
    cases.append(("all irrelevant: the first frame", stack(["__GI_a", "__GI_b"])))
    cases.append(("no frames", SignatureInput(threads: [[]], crashingThread: 0)))
    cases.append(("no crashing thread: thread 0", SignatureInput(threads: [[Frame(module: "app", function: "main", offset: "0x1")]], crashingThread: nil)))
    cases.append(("crashing thread 1", SignatureInput(threads: [[Frame(module: "app", function: "idle", offset: "0x1")],
                                                                 [Frame(module: "app", function: "crash_here(void*)", offset: "0x2")]],
                                                       crashingThread: 1)))
    return cases
  }()

  @Test(.enabled(if: Siggen.isInstalled, Comment(rawValue: Siggen.skipReason)), arguments: cases.indices)
  func generatedStackAsSiggenSignsIt(_ index: Int) throws {
    let (rule, input) = Self.cases[index]
    let lists = try #require(Self.siggenLists, "siggen's lists did not read")
    let expected = try Self.siggenSignature(input)
    #expect(Signature.signature(of: input, lists: lists) == expected, "\(rule)")
  }

  /// The compiled-in default lists are the files beside them (Sources/Symbolication/SignatureLists),
  /// and every entry compiles.
  @Test func defaultListsAreTheFiles() throws {
    let folder = packageRoot + "/Sources/Symbolication/SignatureLists"
    let files = try SignatureLists(directory: folder)
    let compiled = SignatureLists.imagelogDefaults
    #expect(files.irrelevant == compiled.irrelevant && files.prefix == compiled.prefix)
    #expect(files.lineNumbers == compiled.lineNumbers && files.sentinels == compiled.sentinels)
    #expect(compiled.irrelevant.contains("raise$") && compiled.prefix.contains("__assert_fail$"))
    // The texts whole, comments too (Scripts/make-signature-lists was run after the last edit).
    for (name, text) in [(SignatureLists.fileNames.irrelevant, DefaultSignatureLists.irrelevant),
                         (SignatureLists.fileNames.prefix, DefaultSignatureLists.prefix),
                         (SignatureLists.fileNames.lineNumbers, DefaultSignatureLists.lineNumbers),
                         (SignatureLists.fileNames.sentinels, DefaultSignatureLists.sentinels)] {
      let file = try #require(readFile(folder + "/" + name))
      #expect(file == text + "\n", "\(name): run Scripts/make-signature-lists")
    }
  }

  /// An expression is parsed only for a string that starts with the literal text its every match starts
  /// with: that text for each shape of expression, and the answer with it the same as the expression's
  /// own (Swift's `Regex`, parsed for every string) over siggen's lists and ours, for every frame name
  /// the rule cases and the defaults' cases use and every literal prefix in the lists.
  @Test func expressionsAreParsedOnlyPastTheirLiteralStart() throws {
    let starts: [(String, String)] = [
      ("__.*_chk$", "__"), ("__(w)?mem(cpy|move|set)_avx", "__"), ("ab*c", "a"), ("ab?c", "a"), ("ab+c", "a"),
      ("ab{2}", "a"), ("a|b", ""), ("(a|b)c", ""), ("x(a|b)c", "x"), ("[ab]c", ""), ("x[a|b]|y", ""), ("x[a|b]", "x"),
      ("\\.foo\\(", ".foo("), ("\\d+x", ""), ("std::foo\\w", "std::foo"), ("^abc", ""), ("(?i)abc", ""), ("abc", "abc"),
    ]
    for (expression, start) in starts {
      #expect(SignaturePattern.literalStart(expression) == start, "\(expression)")
    }
    var lists = [SignatureLists.imagelogDefaults]
    if let siggen = Self.siggenLists { lists.append(siggen) }
    let entries = lists.flatMap { $0.irrelevant + $0.prefix + $0.lineNumbers }
    var names = Set(Self.cases.flatMap { $0.1.threads.flatMap { $0.compactMap(\.function) } })
    names.formUnion(["__memcpy_avx_unaligned_erms", "__wmemset_avx2_unaligned", "__strlen_avx2", "__sprintf_chk", "__memcpy_chk",
                     "__libc_start_main", "memcpy", "_chk", "__x_chk", "__mem", "__strchr_sse2"])
    names.formUnion(entries.map { SignaturePattern.literalStart($0) })
    names.formUnion(entries.map { SignaturePattern.literalStart($0) + "x" })
    var compared = 0
    for entry in entries where SignaturePattern.literal(entry) == nil {
      let expression = SignaturePattern.Expression(entry)
      let regex = try Regex(entry).matchingSemantics(.unicodeScalar)
      for name in names {
        #expect(expression.matchesStart(of: name) == ((try? regex.prefixMatch(in: name)) != nil), "\(entry) on \(name)")
        compared += 1
      }
    }
    #expect(compared > 4 * names.count)
  }

  /// A list that does not compile is an error naming the file and the entry.
  @Test func badListIsNamed() throws {
    let folder = try makeTemporaryDirectory("imagelog-signature-lists")
    defer { _ = try? runChild(["rm", "-rf", folder]) }
    let fd = open(folder + "/prefix_signature_re.txt", O_WRONLY | O_CREAT | O_EXCL, 0o644)
    try #require(fd >= 0)
    _ = "# a comment\nmalloc\nbroken(\n".withCString { write(fd, $0, strlen($0)) }
    close(fd)
    #expect(throws: ReportError("prefix_signature_re.txt: entry 2 is no regular expression: broken(")) {
      try SignatureLists(directory: folder)
    }
    #expect(throws: ReportError(folder + "/none: not a folder of signature lists")) {
      try SignatureLists(directory: folder + "/none")
    }
  }

  /// imagelog's default lists against siggen's on Linux, Swift and Apple stacks: where they give
  /// another signature, which rule and why (siggen's answer from siggen itself; ours as our lists say).
  @Test(.enabled(if: Siggen.isInstalled, Comment(rawValue: Siggen.skipReason)))
  func defaultListsWhereTheyDiffer() throws {
    let ours = SignatureLists.imagelogDefaults
    // glibc's abort of a failed assert(3): siggen keeps `raise` and `abort` (prefixes in its lists, for
    // Windows' and Gecko's aborts); imagelog skips how a signal is raised (irrelevant) and keeps the
    // assertion as a prefix, so the signature names the assertion and where it failed.
    let assertion = Self.stack(["__pthread_kill_implementation", "raise", "abort", "__assert_fail_base", "__assert_fail", "parse_header(char const*)", "main"])
    #expect(Signature.signature(of: assertion, lists: ours) == "__assert_fail | parse_header")
    #expect(try Self.siggenSignature(assertion) != Signature.signature(of: assertion, lists: ours))
    #expect(try Self.siggenSignature(assertion) == Signature.signature(of: assertion, lists: try #require(Self.siggenLists)))
    // Swift's fatalError: siggen's lists know no Swift runtime frame, so its signature is the runtime's
    // reporting function; imagelog's skip the runtime's reporting and keep the trap as a prefix.
    let swift = Self.stack(["swift_runtime_on_report", "_swift_stdlib_reportFatalErrorInFile", "fatalError(_:file:line:)",
                            "Parser.parse(_:)", "main"])
    #expect(Signature.signature(of: swift, lists: ours) == "fatalError | Parser.parse")
    #expect(try Self.siggenSignature(swift) == "swift_runtime_on_report")
    // An ASan report: siggen skips no sanitizer frame; imagelog skips the runtime's interceptor.
    let asan = Self.stack(["__asan_memcpy", "copy_name(char*, char const*)", "main"])
    #expect(Signature.signature(of: asan, lists: ours) == "copy_name")
    #expect(try Self.siggenSignature(asan) == "__asan_memcpy")
    // Objective-C: both keep the throw as a prefix; imagelog's also skips Apple's abort path.
    let objc = Self.stack(["__pthread_kill", "pthread_kill", "abort", "abort_message", "demangling_terminate_handler()",
                           "_objc_terminate()", "std::__terminate(void (*)())", "std::terminate()", "objc_exception_throw",
                           "-[MyView layout]"])
    #expect(Signature.signature(of: objc, lists: ours) == "std::terminate | objc_exception_throw | -[MyView layout]")
  }
}
