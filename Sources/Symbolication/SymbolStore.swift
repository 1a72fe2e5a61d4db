import ProcessInspection
import ImageReaders
import Snapshot

/// Breakpad symbol stores: folders laid out as `dump_syms -s` writes them and `minidump-stackwalk
/// --symbols-path` reads them, `STORE/NAME/DEBUGID/NAME.sym`. An image no file is found for is looked
/// up here by its file name and identity; a `.sym` is used only when its `MODULE` debug id is the
/// image's, as every file is.
///
/// `NAME` is the image's file name (the last component of its path, `/` or `\`); for a Windows
/// debug file `foo.pdb`, the symbol file is `foo.sym`, as Breakpad names it. Each image is looked up
/// once and each `.sym` read once (a store serves many reports: keep one).
package final class SymbolStore {
  /// The store folders, searched in order.
  package let directories: [String]
  private var lookups: [String: (outcome: Outcome, notes: [String])] = [:]
  private var files: [String: Result<BreakpadSymbolFile, ReportError>] = [:]
  /// The names in each store folder, listed at its first lookup: an image whose folder is not there is
  /// not looked for further (a dump names dozens of system libraries a store seldom holds: one listing
  /// costs less than a failed open each). `nil`: not listed, each image's folder is opened (a folder
  /// that cannot be read, as with search permission only, or that holds more than `listingLimit`
  /// names, where a listing would cost more than the opens it saves).
  private var listings: [String: [String]?] = [:]
  /// The most names a store folder's listing holds.
  static let listingLimit = 1024

  /// A store over `directories` (searched in order).
  package init(directories: [String]) {
    self.directories = directories
  }

  /// What the store holds for one image.
  package enum Outcome: Sendable {
    /// The symbol file at `path`, whose `MODULE` debug id is the image's.
    case found(BreakpadSymbolFile, path: String)
    /// Symbol files for the image's name exist, none with its debug id: the first one's.
    case mismatch(fileID: String, path: String)
    case missing
  }

  /// The folder and file name Breakpad gives a module named `name` (a path, or a file name alone):
  /// `libc.so.6` and `libc.so.6.sym`; `foo.pdb` and `foo.sym`. The ` (deleted)` Linux puts after the
  /// path of a mapped file since deleted is not part of it (a running server whose binary was replaced).
  package static func names(of name: String) -> (folder: String, file: String) {
    let path = Image.withoutDeletedMark(name).path
    let leaf = path.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? path
    if leaf.lowercased().hasSuffix(".pdb") { return (leaf, leaf.dropLast(4) + ".sym") }
    return (leaf, leaf + ".sym")
  }

  /// The symbol file for `image`: `NAME/DEBUGID/NAME.sym` in the first store that has one whose
  /// `MODULE` debug id is the image's identity (in any form: a build-id, a UUID, a debug id).
  /// `NAME` is the debug file's name where the source records one (a minidump's `test_app.pdb`), else
  /// the image's file name; where the source records Breakpad's debug id (GUID and age), the folder
  /// must be that id, as minidump-stackwalk looks it up (a PDB's age tells its builds apart).
  /// `notes` name the files refused on the way: unreadable, malformed, or with another `MODULE`.
  package func symbols(for image: ProcessSnapshot.Image) -> (outcome: Outcome, notes: [String]) {
    guard let identity = image.identity, !directories.isEmpty else { return (.missing, []) }
    let (folder, fileName) = Self.names(of: image.debugFileName ?? image.path ?? image.name)
    guard !folder.isEmpty, folder != "." && folder != ".." else { return (.missing, []) }
    let key = identity.text + "\u{0}" + folder
    if let known = lookups[key] { return known }
    var notes: [String] = []
    var mismatch: (fileID: String, path: String)?
    var outcome = Outcome.missing
    search: for directory in directories where mayHold(directory, folder) {
      for id in FileSystem.contents(directory + "/" + folder).sorted() {
        let path = directory + "/" + folder + "/" + id + "/" + fileName
        // Other builds' folders are only named, and only the first is looked at: a store keeps many.
        guard let folderUUID = Self.uuid(ofDebugID: id), identity.match(BuildID(folderUUID)) != .different,
              image.debugID.map({ $0.uppercased() == id.uppercased() }) ?? true else {
          if mismatch == nil, FileSystem.kind(path) == .file { mismatch = (id, path) }
          continue
        }
        guard FileSystem.kind(path) == .file else { continue }
        let file: BreakpadSymbolFile
        switch read(path) {
        case .success(let read): file = read
        case .failure(let error):
          notes.append("\(path): not used: \(error)")
          continue
        }
        guard file.module.id.uppercased() == id.uppercased(), let uuid = Self.uuid(ofDebugID: file.module.id),
              identity.match(BuildID(uuid)) != .different else {
          notes.append("\(path): not used: MODULE debug id \(file.module.id) differs from \(identity.text)")
          continue
        }
        outcome = .found(file, path: path)
        break search
      }
    }
    if case .missing = outcome, let mismatch { outcome = .mismatch(fileID: mismatch.fileID, path: mismatch.path) }
    lookups[key] = (outcome, notes)
    return (outcome, notes)
  }

  /// False when store folder `directory` was listed and has no entry `folder`.
  private func mayHold(_ directory: String, _ folder: String) -> Bool {
    if listings[directory] == nil { listings[directory] = .some(FileSystem.contents(directory, limit: Self.listingLimit)) }
    guard case let names?? = listings[directory] else { return true }
    // Sorted by `<`, as the search below compares.
    var low = 0, high = names.count
    while low < high {
      let middle = (low + high) / 2
      if names[middle] < folder { low = middle + 1 } else { high = middle }
    }
    return low < names.count && names[low] == folder
  }

  /// The 16 UUID bytes a Breakpad debug id stands for (its GUID fields swapped back), `nil` when it is
  /// not 32 hex digits and an age of up to 8.
  static func uuid(ofDebugID text: String) -> [UInt8]? {
    guard text.utf8.count >= 33, text.utf8.count <= 40, text.allSatisfy(\.isHexDigit),
          let guid = ImageIdentity(text.prefix(32)) else { return nil }
    return BuildID.swappingGUIDFields(guid.bytes)
  }

  /// The symbol file at `path`, read once.
  private func read(_ path: String) -> Result<BreakpadSymbolFile, ReportError> {
    if let known = files[path] { return known }
    let result: Result<BreakpadSymbolFile, ReportError>
    do {
      // The mapping is kept (not copied): what is read on demand is read there.
      result = .success(try BreakpadSymbolFile(try MappedFile(path: path), reading: .onDemand))
    } catch {
      result = .failure(ReportError("\(error)"))
    }
    files[path] = result
    return result
  }
}

extension SymbolStore {
  /// A store over `directories`, `nil` when there are none.
  convenience init?(_ directories: [String]) {
    guard !directories.isEmpty else { return nil }
    self.init(directories: directories)
  }
}
