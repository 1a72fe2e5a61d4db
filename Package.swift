// swift-tools-version: 6.1
import PackageDescription

let package = Package(
  name: "imagelog",
  products: [
    .library(name: "ImageLog", targets: ["ImageLog"]),
    .library(name: "ImageReaders", targets: ["ImageReaders"]),
    .library(name: "ImageLogSymbolication", targets: ["ImageLogSymbolication"]),
    .library(name: "ImageLogAudit", type: .dynamic, targets: ["CImageLogAudit"]),
    .executable(name: "imagelog", targets: ["imagelog"]),
  ],
  dependencies: [],
  targets: [
    // C shim over the dynamic loader: dl_iterate_phdr, dladdr, dlopen/dlclose forwarding, process_vm_readv.
    .target(name: "CImageLog"),
    // rtld-audit module for `imagelog run` (LD_AUDIT); a shared library of its own.
    .target(name: "CImageLogAudit"),
    // Pure Swift readers for ELF and Mach-O bytes: no Foundation, no Glibc.
    .target(name: "ImageReaders"),
    // The in-process image list, observers, formatting, other processes. No Foundation.
    .target(name: "ImageLog", dependencies: ["CImageLog", "ImageReaders"]),
    // Crash report parsing and address-to-symbol resolution.
    .target(name: "ImageLogSymbolication", dependencies: ["ImageLog", "ImageReaders", "CImageLog"]),
    // The Swift runtime linked in (as `--static-swift-stdlib`): a run over a few files is mostly process
    // start-up, and loading libswiftCore and its companions costs more than the work (`make bench`).
    .executableTarget(name: "imagelog", dependencies: ["ImageLog", "ImageReaders", "ImageLogSymbolication"],
                      linkerSettings: [.unsafeFlags(["-static-stdlib"])]),
    // `make bench`: side-by-side measurements against real peers; writes BENCHMARKS.md.
    .executableTarget(name: "ImageLogBenchmarks",
                      dependencies: ["ImageLog", "ImageReaders", "ImageLogSymbolication", "CImageLog"]),
    .testTarget(name: "ImageReadersTests", dependencies: ["ImageReaders"],
                exclude: ["Fixtures"]),
    .testTarget(name: "ImageLogTests", dependencies: ["ImageLog", "ImageReaders", "CImageLog"]),
    .testTarget(name: "ImageLogSymbolicationTests", dependencies: ["ImageLogSymbolication", "ImageLog", "ImageReaders"]),
    .testTarget(name: "imagelogTests", dependencies: ["ImageLog", "ImageReaders"]),
  ],
  swiftLanguageModes: [.v6]
)
