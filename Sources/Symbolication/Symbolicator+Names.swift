import ProcessInspection
import ImageReaders

extension Symbolicator {
  /// Below this many distinct functions, names are demangled on the calling thread alone: a crash
  /// report's few dozen frames are done before a second thread would start.
  static let parallelNamesThreshold = 2048

  /// The raw and readable names of the symbols at `symbols` (positions in `table`), in that order.
  ///
  /// Demangling is most of the work of a long address list, and each name is independent of the
  /// others: a large list is split into contiguous chunks demangled on the available cores, one
  /// `Demangler` per chunk (each call of the runtime's demangler has its own context). The answer is
  /// the same, in the same order, however it was split.
  static func names(of symbols: [Int], in table: SymbolTable, demangler: Demangler) -> [(raw: String, name: String)] {
    // A few chunks per core: a core taken by another process then delays only a small piece. (The
    // processors are counted only for a long list: counting reads a /sys file.)
    let processors = symbols.count < parallelNamesThreshold ? 1 : WorkerThread.processorCount
    let chunks = processors < 2 ? 1 : min(processors * 4, 32, symbols.count / (parallelNamesThreshold / 4))
    guard chunks > 1 else { return symbols.map { name(of: $0, in: table, demangler: demangler) } }
    let style = demangler.style
    return [(raw: String, name: String)](unsafeUninitializedCapacity: symbols.count) { buffer, initialized in
      symbols.withUnsafeBufferPointer { symbols in
        // Not empty (chunks > 1), so both have a base address.
        guard let symbolBase = symbols.baseAddress, let outputBase = buffer.baseAddress else { return }
        let input = SendableInput(base: symbolBase, count: symbols.count)
        let output = SendableOutput(base: outputBase)
        WorkerThread.perform(iterations: chunks, threads: processors) { chunk in
          // Chunk `chunk` owns positions lower..<upper of the output: no two chunks touch one element.
          let lower = input.count * chunk / chunks
          let upper = input.count * (chunk + 1) / chunks
          let chunkDemangler = Demangler(style: style)  // its own output buffer
          for position in lower..<upper {
            (output.base + position).initialize(to: name(of: input.base[position], in: table, demangler: chunkDemangler))
          }
        }
        initialized = symbols.count  // every chunk ran to completion: perform returns after all
      }
    }
  }

  /// One symbol's raw name and its demangled form (the raw one when it does not demangle).
  static func name(of symbol: Int, in table: SymbolTable, demangler: Demangler) -> (raw: String, name: String) {
    let raw = table.symbol(at: symbol).name
    return (raw, table.withRawName(at: symbol) { demangler.demangle(rawName: $0) } ?? raw)
  }
}

// Pointers handed to `WorkerThread.perform`'s workers, which read `SendableInput` and write disjoint
// ranges of `SendableOutput` (see `names(of:in:demangler:)`).
private struct SendableInput: @unchecked Sendable {
  let base: UnsafePointer<Int>
  let count: Int
}

private struct SendableOutput: @unchecked Sendable {
  let base: UnsafeMutablePointer<(raw: String, name: String)>
}
