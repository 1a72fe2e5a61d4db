/// What crash tooling asks of one architecture slice of a binary file, the same for ELF and Mach-O:
/// the fields of a crash report's "Binary Images" line and of `dwarfdump --uuid`.
public struct SliceSummary: Sendable, Equatable {
  /// The architecture name (`x86_64`, `arm64`, `arm64e`, `i386`, `armv7s`, ...).
  public var architecture: String
  /// A short file type: `executable`, `pie`, `shared-object`, `core`, `relocatable` (ELF);
  /// `execute`, `dylib`, `bundle`, `dsym`, `object`, ... (Mach-O `filetype`).
  public var fileType: String
  /// GNU build-id or `LC_UUID`; `nil` when the file has none.
  public var buildID: BuildID?
  /// Link-time text span: ELF from the first `PT_LOAD` (page-aligned) to the end of the last
  /// executable `PT_LOAD`; Mach-O `__TEXT` vmaddr..<vmaddr+vmsize.
  public var textVMRange: Range<UInt64>
  /// Link-time span of everything loaded (all `PT_LOAD`s / all segments but `__PAGEZERO`).
  public var loadVMRange: Range<UInt64>
  /// `DT_SONAME` or the `LC_ID_DYLIB` install name.
  public var installName: String?
  /// `DT_NEEDED` entries or dependent dylib paths, in file order.
  public var dependencies: [String]
  /// For a slice of a universal file, its offset in the file; 0 otherwise.
  public var fileOffset: UInt64

  package init(architecture: String, fileType: String, buildID: BuildID?, textVMRange: Range<UInt64>,
              loadVMRange: Range<UInt64>, installName: String? = nil, dependencies: [String] = [],
              fileOffset: UInt64 = 0) {
    self.architecture = architecture
    self.fileType = fileType
    self.buildID = buildID
    self.textVMRange = textVMRange
    self.loadVMRange = loadVMRange
    self.installName = installName
    self.dependencies = dependencies
    self.fileOffset = fileOffset
  }
}

extension BinaryFile {
  /// One summary per architecture slice: one for ELF and thin Mach-O, one per slice of a universal file.
  public var slices: [SliceSummary] {
    switch self {
    case .elf(let file): [file.summary]
    case .machO(let file): [file.summary]
    case .fat(let file): file.slices
    }
  }
}
