import ProcessInspection
import ImageReaders
import Snapshot

/// What a crashed process's signal handler recorded for imagelog's capture helper
/// (`CImageLogCrashHelper.h`): the signal, `si_code`, fault address, the crashed thread, the time,
/// and that thread's registers as the kernel gave them to the handler. The helper reads it from the
/// crashed process (`read(pid:at:)`) and unwinds the crashed thread from these registers, not from
/// where the handler waits.
public struct CrashRecord: Sendable, Equatable {
  /// The crashed process.
  package var pid: Int32
  /// The thread that crashed.
  package var tid: Int32
  /// `si_signo`.
  package var signal: Int32
  /// `si_code`.
  package var code: Int32
  /// `si_addr` for a fault the kernel raised, else 0.
  package var faultAddress: Address
  /// When the handler ran, seconds since the epoch (UTC).
  package var date: Int64
  /// The registers' architecture: `.x86_64` or `.aarch64`.
  package var architecture: RegisterSet.Architecture
  /// DWARF-numbered registers (`CImageLogUnwind.h`), nil where the handler had no value.
  package var registers: [UInt64?]
  /// x86_64's `rflags`, aarch64's `pstate`.
  package var flags: UInt64
  /// Where the handler's `siginfo_t` and `ucontext_t` are in the crashed process (its signal frame).
  package var siginfoAddress: Address, contextAddress: Address
  /// Where the process keeps the images it removed (`crash_unloaded.h`), 0 without one (version 1).
  package var historyAddress: Address = 0
  /// When the handler ran, nanoseconds since the epoch (the history's clock); nil in version 1.
  package var dateNanoseconds: Int64?

  /// The record's size in bytes: version 1, and version 2 (with the history's address and the time in
  /// nanoseconds).
  static let size = 352, sizeVersion2 = 368
  static let magic: [UInt8] = Array("ILCRASH".utf8) + [0]

  /// Why a record could not be had.
  package enum ReadError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes at the address could not be read (no access, the process gone, a wrong address).
    case unreadable(pid: Int32, address: Address)
    /// The bytes are not a record this helper reads.
    case malformed(pid: Int32, address: Address, String)

    package var description: String {
      switch self {
      case let .unreadable(pid, address):
        "pid \(pid): cannot read the crash record at 0x\(hexDigits(address))"
      case let .malformed(pid, address, what):
        "pid \(pid): the crash record at 0x\(hexDigits(address)) is not usable: \(what)"
      }
    }
  }

  /// Reads the record at `address` in process `pid` and checks it is that process's.
  package static func read(pid: Int32, at address: Address) throws(ReadError) -> CrashRecord {
    // Version 2's size first; a version 1 record may end its mapping 16 bytes sooner.
    var bytes = [UInt8](repeating: 0, count: sizeVersion2)
    var read = bytes.withUnsafeMutableBytes { ProcessMemory(pid: pid).read(address, into: $0) }
    if !read {
      bytes = [UInt8](repeating: 0, count: size)
      read = bytes.withUnsafeMutableBytes { ProcessMemory(pid: pid).read(address, into: $0) }
    }
    guard read else { throw .unreadable(pid: pid, address: address) }
    let record: CrashRecord
    do {
      record = try decode(bytes)
    } catch {
      throw .malformed(pid: pid, address: address, error.description)
    }
    guard record.pid == pid else { throw .malformed(pid: pid, address: address, "it names pid \(record.pid)") }
    return record
  }

  /// The record in `bytes`, field by field (the layout is `CImageLogCrashHelper.h`'s).
  static func decode(_ bytes: [UInt8]) throws(FormatError) -> CrashRecord {
    try ByteReader.reading(bytes, endian: .little) { (start: ByteReader) throws(FormatError) -> CrashRecord in
      var reader = start
      guard try reader.readBytes(8) == magic else { throw .elf("no ILCRASH magic") }
      let version = try reader.read(UInt32.self), size = try reader.read(UInt32.self)
      guard (version == 1 && size == UInt32(Self.size)) || (version == 2 && size == UInt32(Self.sizeVersion2)) else {
        throw .elf("version \(version), size \(size): not version 1 or 2")
      }
      let pid = try reader.read(Int32.self), tid = try reader.read(Int32.self)
      let signal = try reader.read(Int32.self), code = try reader.read(Int32.self)
      let faultAddress = try reader.read(UInt64.self)
      let date = try reader.read(Int64.self)
      let architectureNumber = try reader.read(UInt32.self), count = try reader.read(UInt32.self)
      let known = try reader.read(UInt64.self), flags = try reader.read(UInt64.self)
      let siginfoAddress = try reader.read(UInt64.self), contextAddress = try reader.read(UInt64.self)
      guard count == 33 else { throw .elf("\(count) registers, not 33") }
      let architecture: RegisterSet.Architecture
      switch architectureNumber {
      case 1: architecture = .x86_64
      case 2: architecture = .aarch64
      default: throw .elf("architecture \(architectureNumber) is neither x86_64 (1) nor aarch64 (2)")
      }
      guard tid > 0, signal > 0, signal < 65 else { throw .elf("thread \(tid), signal \(signal)") }
      var registers: [UInt64?] = []
      registers.reserveCapacity(33)
      for number in 0..<33 {
        let value = try reader.read(UInt64.self)
        registers.append(known & (1 << UInt64(number)) != 0 ? value : nil)
      }
      var record = CrashRecord(pid: pid, tid: tid, signal: signal, code: code, faultAddress: faultAddress, date: date,
                               architecture: architecture, registers: registers, flags: flags,
                               siginfoAddress: siginfoAddress, contextAddress: contextAddress)
      if version == 2 {
        record.historyAddress = try reader.read(UInt64.self)
        record.dateNanoseconds = try reader.read(Int64.self)
      }
      return record
    }
  }

  /// Gives the crashed thread of `threads` the recorded registers, and its stack copied from the recorded
  /// stack pointer (`ProcessThreads.replaceRegisters`): the crashed frames, not the waiting handler's.
  func replaceRegisters(in threads: inout ProcessThreads) {
    threads.replaceRegisters(ofThread: tid, dwarf: registers, flags: flags)
  }
}
