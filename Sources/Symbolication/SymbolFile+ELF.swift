import ProcessInspection
import ImageReaders

extension SymbolFile {
  /// An ELF file: build-id, where its first `PT_LOAD` maps, `.symtab`/`.dynsym`, DWARF presence.
  /// `mapped`: the mapping `reader` reads, kept with the decoded headers by a `.presence` load.
  static func elf(_ reader: ByteReader, path: String, reading: SymbolReading,
                  mapped: MappedFile? = nil) throws(FormatError) -> SymbolFile {
    let file = try ELFFile(reader)
    let symbols = reading == .table ? try SymbolTable.elf(file, bytes: reader) : SymbolTable()
    let load = file.loadVMRange
    var altLink: DebugAltLink?
    var altLinkProblem: String?
    // A broken .gnu_debugaltlink costs only the supplementary DWARF: the symbols stay usable.
    do { altLink = try file.debugAltLink(in: reader) } catch { altLinkProblem = error.description }
    // So is a .symtab past the end of the file: the exported symbols (.dynsym) are read instead.
    let tableProblem = SymbolTable.elfSymbolTableProblem(file, bytes: reader)
    var result = SymbolFile(path: path, architecture: file.architecture, isUniversalSlice: false, buildID: file.buildID,
                      imageBaseVMAddress: load.lowerBound, loadSize: load.isEmpty ? nil : load.upperBound - load.lowerBound,
                      symbols: symbols, hasDebugInfo: file.debugInfo.hasDebugInfo,
                      hasFullSymbolTable: tableProblem == nil && file.sections.contains { $0.type == ELFSection.symbolTableType },
                      debugLink: file.debugInfo.debugLinkFileName, debugLinkCRC: file.debugInfo.debugLinkCRC,
                      debugAltLink: altLink, debugAltLinkProblem: altLinkProblem,
                      presentSymbols: reading == .presence ? try SymbolTable.elfHasCodeSymbols(file, bytes: reader) : nil)
    result.isFixedAddress = file.kind == .executable
    if reading == .presence, let mapped { result.symbolSource = (mapped, file) }
    result.symbolTableProblem = tableProblem.map { "\($0): only its exported symbols (.dynsym) are read" }
    return result
  }
}
