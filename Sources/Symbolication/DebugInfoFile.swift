import Snapshot
import ProcessInspection
import ImageReaders

/// The DWARF of one binary or debug file (one slice of a universal file), ready to answer addresses:
/// the file is mapped, its debug sections found and decompressed, and its units indexed once.
///
/// Not thread-safe: answers fill caches.
package final class DebugInfoFile {
  /// The file's path.
  package let path: String
  private let mapped: MappedFile?
  private let supplementaryMapped: MappedFile?
  /// What answers addresses: the DWARF, or the symbol cache built from it (see `SymbolCacheStore`).
  private(set) var answers: Answers
  /// For reading the DWARF after all when a symbol cache fails a lookup.
  private var dwarfSource: (architecture: String?, supplementaryPath: String?) = (nil, nil)
  enum Answers {
    case dwarf(DWARFReader)
    case symbolCache(SymbolCacheFile)
  }
  /// The bytes its compressed sections, and its supplementary file's, were inflated to: at most
  /// `DWARFSections.maximumInflatedTotal`.
  package let inflatedByteCount: UInt64

  /// Maps `path` (an ELF file, a thin Mach-O file or a universal file, whose slice `architecture`
  /// picks; a lone slice needs none) and, when given, the supplementary file at `supplementaryPath`
  /// (dwz's `.gnu_debugaltlink` target). Throws `ReportError` naming the file when it cannot be read,
  /// is not ELF or Mach-O, has no such slice, its DWARF is broken from the start, or its compressed
  /// sections (with the supplementary file's) claim more than `DWARFSections.maximumInflatedTotal`.
  package init(path: String, architecture: String? = nil, supplementaryPath: String? = nil) throws {
    self.path = path
    let file = try Self.map(path)
    mapped = file
    var sections = try Self.sections(file, architecture: architecture, inflatedBefore: 0)
    if let supplementaryPath {
      let supplementary = try Self.map(supplementaryPath)
      supplementaryMapped = supplementary
      sections.supplementary = try Self.sections(supplementary, architecture: architecture,
                                                 inflatedBefore: sections.inflatedByteCount)
    } else {
      supplementaryMapped = nil
    }
    // Both are within the limit checked as they were read, so the sum cannot overflow.
    inflatedByteCount = sections.inflatedByteCount + (sections.supplementary?.inflatedByteCount ?? 0)
    do {
      answers = .dwarf(try DWARFReader(sections))
    } catch {
      throw ReportError("\(path): \(error)")
    }
  }

  /// The file at `path` answered from its symbol cache `symbolCache`.
  init(path: String, architecture: String?, supplementaryPath: String?, symbolCache: SymbolCacheFile) {
    self.path = path
    (mapped, supplementaryMapped, inflatedByteCount) = (nil, nil, 0)
    answers = .symbolCache(symbolCache)
    dwarfSource = (architecture, supplementaryPath)
  }

  /// The frames of link-time address `address`, innermost first (see `DWARFReader.frames(at:)`); empty
  /// when no DWARF covers it. Throws `ReportError` naming the file for DWARF that is broken there.
  package func frames(at address: UInt64) throws -> [DWARFFrame] {
    if case .symbolCache(let file) = answers {
      do {
        return try file.frames(at: address)
      } catch {
        // Records that point nowhere got past the checks: the DWARF answers from now on.
        let sections = try Self.dwarfSections(path: path, architecture: dwarfSource.architecture,
                                              supplementaryPath: dwarfSource.supplementaryPath)
        do { answers = .dwarf(try DWARFReader(sections)) } catch { throw ReportError("\(path): \(error)") }
      }
    }
    do {
      guard case .dwarf(let reader) = answers else { return [] }
      return try reader.frames(at: address)
    } catch {
      throw ReportError("\(path): \(error)")
    }
  }

  /// The DWARF sections of `path` (a slice picked by `architecture`) and of its supplementary file,
  /// decompressed and kept alive by the sections themselves: for readers of one's own (a `DWARFReader`
  /// is for one thread). Throws `ReportError` naming the file as `init` does.
  package static func dwarfSections(path: String, architecture: String? = nil,
                                    supplementaryPath: String? = nil) throws -> DWARFSections {
    var sections = try Self.sections(map(path), architecture: architecture, inflatedBefore: 0)
    if let supplementaryPath {
      sections.supplementary = try Self.sections(map(supplementaryPath), architecture: architecture,
                                                 inflatedBefore: sections.inflatedByteCount)
    }
    return sections
  }

  private static func map(_ path: String) throws -> MappedFile {
    do {
      return try MappedFile(path: path)
    } catch {
      throw ReportError("\(path): \(error)")
    }
  }

  /// Runs a section's inflation on a worker thread (`DWARFSections.inflateAll`); on the calling thread
  /// when there is one processor or no thread can be started.
  static func inflateAside(_ work: @escaping @Sendable () -> Void) -> () -> Void {
    guard WorkerThread.processorCount > 1, let thread = WorkerThread.start(work) else {
      work()
      return {}
    }
    return { thread.join() }
  }

  /// `inflatedBefore`: what the file `file` supplements inflated, which its own claims add to.
  private static func sections(_ file: MappedFile, architecture: String?, inflatedBefore: UInt64) throws -> DWARFSections {
    let result = file.withReader { bytes -> Result<DWARFSections, FormatError> in
      Result { () throws(FormatError) -> DWARFSections in
        switch try BinaryFile.parse(bytes) {
        case .elf(let elf):
          return try DWARFSections.elf(elf, bytes: bytes, owner: file, decompress: SystemDecompressor.decompress,
                                       inflatedBefore: inflatedBefore, background: Self.inflateAside)
        case .machO(let machO):
          return try DWARFSections.machO(machO, slice: bytes, owner: file)
        case .fat(let fat):
          let candidates = fat.members.filter { architecture == nil || $0.architecture == architecture }
          guard let member = candidates.count == 1 ? candidates.first : nil, let machO = member.decoded else {
            let names = fat.members.map(\.architecture).joined(separator: ", ")
            throw .fat(architecture.map { "no \($0) slice (slices: \(names))" } ?? "several slices (\(names)): name one")
          }
          let range = try ByteReader.checkedRange(offset: member.fileOffset, size: member.size, limit: bytes.count,
                                                  "slice \(member.architecture)")
          return try DWARFSections.machO(machO, slice: try bytes.slice(at: range.lowerBound, length: range.count), owner: file)
        }
      }
    }
    switch result {
    case .success(let sections): return sections
    case .failure(let error): throw ReportError("\(file.path): \(error)")
    }
  }
}
