import ProcessInspection
import ImageReaders

/// What a file given to a command is, as its first bytes say: the one place that tells an ELF core and
/// a minidump from text, for `CrashFile`, which opens each as what it is. Text is every other crash
/// imagelog reads (each report kind, several reports in one file, a crash document, bare addresses),
/// which `ReportParser` tells apart by the text itself.
package enum CrashFileKind: Sendable, Equatable {
  /// An ELF core (`ET_CORE`).
  case core
  /// A minidump (`MDMP`).
  case minidump
  /// Anything else: read as text (or, by `imagelog file`, as a binary).
  case text

  /// How many of a file's first bytes `init(head:)` needs: an ELF header's.
  package static let headSize = 64

  /// The kind `head`, a file's first bytes (up to `headSize`), says.
  package init(head: ByteReader) {
    self = CoreDump.isCore(head) ? .core : MinidumpFile.isMinidump(head) ? .minidump : .text
  }
}
