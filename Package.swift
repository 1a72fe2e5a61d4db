// swift-tools-version: 6.1
import PackageDescription

// Where the imagelog executable's link-time linker script lives (an absolute path: the linker's working
// directory is not the package's).
let staticLinkDirectory = String(#filePath.dropLast("Package.swift".count)) + "Sources/ImageLogCLI/StaticLink"

let package = Package(
  name: "imagelog",
  products: [
    .library(name: "ImageLog", targets: ["ImageLog"]),
    .library(name: "ImageReaders", targets: ["ImageReaders"]),
    // The crash pipeline: a process snapshot from any source, symbolicated, written in any style.
    // It holds no in-process code: ProcessInspection, not ImageLog (PipelineLinkTests).
    .library(name: "CrashPipeline", targets: ["ProcessInspection", "Snapshot", "SnapshotSources", "Symbolication",
                                              "SnapshotFormatting"]),
    .library(name: "ImageLogAudit", type: .dynamic, targets: ["CImageLogAudit"]),
    .executable(name: "imagelog", targets: ["ImageLogCLI"]),
  ],
  dependencies: [],
  targets: [
    // The in-process C: the dlopen/dlmopen/dlclose and pthread_create interposers and the delivery gate
    // (interpose.c, gate.c), the walk of this process's loaded objects and dladdr (objects.c), and the crash
    // handler with its image table and helper (crash_*.c). Only ImageLog links it.
    .target(name: "CImageLog", dependencies: ["CImageLogImage", "CImageLogUnwind", "CImageLogProcess"]),
    // The C that inspects other processes, with nothing interposed: process_vm_readv, /proc stat files,
    // extended attributes (process.c), ptrace captures of another process's threads (ptrace.c), worker
    // threads (threads.c), libcurl's variadic calls (http.c).
    .target(name: "CImageLogProcess"),
    // The one stack unwinder (CFI, frame pointers, scanning) in async-signal-safe C: the crash handler,
    // pid --threads and cores all walk stacks with it.
    .target(name: "CImageLogUnwind"),
    // One image's layout, build-id and event line in C, header-only: shared by the shim and the audit module.
    .target(name: "CImageLogImage"),
    // rtld-audit module for `imagelog run` (LD_AUDIT); a shared library of its own, linked against nothing
    // (audit.c says why): no libc, no crt files, no search path to the toolchain's runtime, and -z defs so
    // that a function the module would need from a library fails the link rather than the audited program.
    .target(name: "CImageLogAudit", dependencies: ["CImageLogImage", "CImageLogUnwind"],
            linkerSettings: [.unsafeFlags(["-no-toolchain-stdlib-rpath", "-Xclang-linker", "-nostdlib",
                                           "-Xlinker", "-z", "-Xlinker", "defs"])]),
    // Pure Swift readers of binary formats (ELF, Mach-O, fat, DWARF, code signatures, minidumps, Breakpad .sym)
    // and the byte-level output the writers share (Output/: JSON, hex, UTF-8 text). No Foundation, no Glibc.
    // The minidump writer is not here: it is SnapshotFormatting's, with the other writers.
    .target(name: "ImageReaders"),
    // What inspects other processes and files, from outside them: their images (ProcessImages, /proc maps,
    // watch) and threads (ProcessThreads, ptrace captures), cores (CoreDump), the stack unwinder's Swift side
    // (Unwinding/), files (MappedFile, FileBytes, FileSystem: the one file writer), crash folders and the
    // crash database, dSYM bundles, worker threads, and the text/JSON formatting of images and binaries
    // (Formatting/). Nothing in it runs inside the process it looks at. No Foundation.
    .target(name: "ProcessInspection", dependencies: ["CImageLogProcess", "CImageLogUnwind", "ImageReaders"]),
    // The in-process library: this process's loaded images (LoadedImages, LoaderView), their observers through
    // the dlopen/dlclose interposers (ImageObservers), dladdr lookups, and the crash reporter (CrashReporter).
    // It re-exports ProcessInspection, so `import ImageLog` gives both. No Foundation.
    .target(name: "ImageLog", dependencies: ["CImageLog", "CImageLogUnwind", "ProcessInspection", "ImageReaders"]),
    // The crash pipeline, source -> model -> symbolication -> writer: every source becomes one model of a
    // process at a moment, which symbolication enriches and the writers read.
    // The model (ProcessSnapshot): the exception, threads with frames and their trust, images with their
    // identities, what the source said about the process.
    // The pipeline's targets depend on ProcessInspection, never on ImageLog: a service embedding CrashPipeline
    // links no interposer and no crash handler (PipelineLinkTests: nm of PipelineLinkCheck, a program linking them).
    .target(name: "Snapshot", dependencies: ["ProcessInspection", "ImageReaders"]),
    // Sources: a live process, a core (a file or a core_pattern stream), a minidump, and each text report
    // kind (imagelog's, Apple's, Swift's, sanitizers, systemd-coredump, Android, glibc), each a snapshot.
    .target(name: "SnapshotSources", dependencies: ["Snapshot", "ProcessInspection", "ImageReaders"]),
    // Symbolication: each image's file found by identity, a minidump's threads unwound with the files'
    // call frame information, each frame named from symbol tables and DWARF.
    // It also makes a crash's signature (Socorro's algorithm) from the symbolicated frames; its default
    // lists are compiled in (DefaultSignatureLists.swift, made from SignatureLists/*.txt, which are
    // there to be read and edited, not resources).
    .target(name: "Symbolication", dependencies: ["Snapshot", "ProcessInspection", "CImageLogProcess", "ImageReaders"], exclude: ["SignatureLists"]),
    // The Breakpad symbol-file writer (`imagelog symbols`, dump_syms's .sym): an object's functions, lines,
    // inlines and call frame rules from its symbol tables and DWARF, prepared in parallel and written as text.
    // Beside the pipeline, not in it: symbolication reads .sym files (and names their registers from the
    // same tables, Registers.breakpadNames), it does not write them.
    .target(name: "BreakpadSymbolWriter", dependencies: ["Symbolication", "Snapshot", "ProcessInspection", "ImageReaders"]),
    // Writers: imagelog's report layout, a report annotated in place, JSON, the classic .crash text, minidumps
    // (MinidumpWriter, the one writer of the layout, and a snapshot as a dump),
    // and a captured crash's files in a crash folder (run --crash-dir, core-handler), which it symbolicates
    // first: writers come after symbolication on the road.
    .target(name: "SnapshotFormatting", dependencies: ["Snapshot", "Symbolication", "ProcessInspection", "ImageReaders"]),
    // A run over a few files is mostly process start-up (`make bench`), so the executable loads only libc and
    // libm: the Swift runtime, libstdc++ (StaticLink/libstdc++.so is a linker script naming the archive) and
    // libgcc are linked in, and it is not position-independent, so the loader has no relative relocations
    // to apply to its 18 MB (about 27,000 of them, and the page copies they cause). A version script keeps
    // its dynamic symbol table to the dlopen/dlclose interposers: the runtime's start-up dladdr scans it.
    // The functions its common commands run are laid out together (StaticLink/hot-sections.txt, made by
    // Scripts/make-hot-sections, read by gold): a start then maps them with fewer page faults.
    // The executable's C part: CommandLine's argv without the runtime's /proc/self/maps scan (argv.c),
    // and `imagelog run`, which execs the command from the first constructor, before the runtime starts (run.c).
    .target(name: "CImageLogMain", dependencies: ["CImageLogImage"]),
    .executableTarget(name: "ImageLogCLI", dependencies: ["ImageLog", "ImageReaders", "Snapshot", "SnapshotSources",
                                                        "Symbolication", "BreakpadSymbolWriter", "SnapshotFormatting",
                                                        "CImageLogMain"],
                      exclude: ["StaticLink"],
                      linkerSettings: [.unsafeFlags(["-static-stdlib", "-L", staticLinkDirectory,
                                                     "-Xclang-linker", "-static-libgcc",
                                                     "-Xclang-linker", "-no-pie",
                                                     // Only the interposers in .dynsym (StaticLink/exports.map).
                                                     "-Xlinker", "--version-script=" + staticLinkDirectory + "/exports.map",
                                                     "-Xlinker", "--section-ordering-file=" + staticLinkDirectory + "/hot-sections.txt"])]),
    // A program linked with the CrashPipeline product's targets only, for PipelineLinkTests' nm check.
    .executableTarget(name: "PipelineLinkCheck",
                      dependencies: ["ProcessInspection", "Snapshot", "SnapshotSources", "Symbolication",
                                     "SnapshotFormatting"]),
    // `make bench`: side-by-side measurements against real peers; writes BENCHMARKS.md.
    .executableTarget(name: "ImageLogBenchmarks",
                      dependencies: ["ImageLog", "ImageReaders", "Snapshot", "SnapshotSources", "Symbolication",
                                     "SnapshotFormatting", "CImageLog"]),
    // What the test targets share: running child processes, temporary folders, files, tools on PATH.
    .target(name: "ImageLogTestSupport", path: "Tests/ImageLogTestSupport"),
    // The readers' tests make their minidumps with SnapshotFormatting's MinidumpWriter.
    .testTarget(name: "ImageReadersTests", dependencies: ["ImageReaders", "SnapshotFormatting", "ImageLogTestSupport"],
                exclude: ["Fixtures"]),
    .testTarget(name: "ImageLogTests", dependencies: ["ImageLog", "ImageReaders", "CImageLog", "CImageLogImage",
                                                     "CImageLogUnwind", "CImageLogProcess", "ProcessInspection", "Snapshot", "SnapshotSources", "Symbolication",
                                                     "SnapshotFormatting",
                                                     "ImageLogTestSupport"]),
    // The pipeline's stages: sources, symbolication, writers.
    .testTarget(name: "SymbolicationTests",
                dependencies: ["Snapshot", "SnapshotSources", "Symbolication", "BreakpadSymbolWriter",
                               "SnapshotFormatting", "ImageLog", "ProcessInspection", "ImageReaders",
                               "ImageLogTestSupport"],
                exclude: ["Fixtures"]),
    .testTarget(name: "ImageLogCLITests", dependencies: ["ImageLog", "ImageReaders", "Snapshot", "SnapshotFormatting",
                                                        "ImageLogTestSupport"]),
    // The symbol cache's format and store (#28), on the DWARF fixtures of SymbolicationTests.
    .testTarget(name: "SymbolCacheTests", dependencies: ["Symbolication", "Snapshot", "ImageLog", "ImageReaders",
                                                          "ImageLogTestSupport"]),
  ],
  swiftLanguageModes: [.v6]
)
