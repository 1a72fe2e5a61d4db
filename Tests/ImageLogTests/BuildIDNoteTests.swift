import CImageLog
import CImageLogImage
import ImageLogTestSupport
import ImageReaders
import Testing
@testable import ImageLog

/// The snapshot's lean build-id scan must agree with `ELFNote.buildIDNote` on every input.
@Suite("In-memory build-id notes")
struct BuildIDNoteTests {
  func both(_ bytes: [UInt8], alignment: Int) -> (lean: String, reference: String) {
    bytes.withUnsafeBytes { raw in
      let reader = ByteReader(raw, endian: .little)
      let lean: String
      do {
        lean = try LoaderImageBuilder.buildIDNote(in: reader, alignment: alignment)
          .map { "\($0.descriptor) at \($0.descriptorOffset)" } ?? "none"
      } catch { lean = "throws" }
      let reference: String
      do {
        reference = try ELFNote.buildIDNote(in: reader, alignment: alignment)
          .map { "\($0.descriptor) at \($0.descriptorOffset)" } ?? "none"
      } catch { reference = "throws" }
      // The C walk the audit module uses (CImageLogImage.h) finds the same descriptor; where the Swift
      // walks throw, it finds none.
      var offset = 0, size = 0
      let inC = raw.count > 0 && il_image_build_id(raw.baseAddress!.assumingMemoryBound(to: UInt8.self), raw.count,
                                                   alignment, &offset, &size) != 0
      let c = inC ? "\(Array(raw[offset..<offset + size])) at \(offset)" : "none"
      #expect(c == (lean == "throws" ? "none" : lean), "C build-id walk")
      return (lean, reference)
    }
  }

  static func note(name: [UInt8], type: UInt32, descriptor: [UInt8], align: Int = 4) -> [UInt8] {
    func le(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
    func pad(_ bytes: [UInt8]) -> [UInt8] { bytes + [UInt8](repeating: 0, count: (align - bytes.count % align) % align) }
    return le(UInt32(name.count)) + le(UInt32(descriptor.count)) + le(type) + pad(name) + pad(descriptor)
  }

  static let gnu: [UInt8] = Array("GNU\u{0}".utf8)

  static let cases: [(String, [UInt8])] = [
    ("build-id alone", note(name: gnu, type: 3, descriptor: [1, 2, 3, 4, 5])),
    ("after a property note", note(name: gnu, type: 5, descriptor: [9, 9, 9, 9]) + note(name: gnu, type: 3, descriptor: [7, 7])),
    ("other owner", note(name: Array("XYZ\u{0}".utf8), type: 3, descriptor: [1])),
    ("GNU without NUL", note(name: Array("GNU".utf8), type: 3, descriptor: [1, 2])),
    ("GNUX", note(name: Array("GNUX".utf8), type: 3, descriptor: [1, 2])),
    ("truncated descriptor", Array(note(name: gnu, type: 3, descriptor: [1, 2, 3, 4, 5, 6, 7, 8]).dropLast(5))),
    ("huge name size", [0xff, 0xff, 0xff, 0x7f, 4, 0, 0, 0, 3, 0, 0, 0] + gnu),
    ("short tail", note(name: gnu, type: 3, descriptor: [1]) + [1, 2, 3]),
    ("empty", []),
  ]

  @Test(arguments: cases)
  func agreesWithELFNote(_ name: String, _ bytes: [UInt8]) {
    for alignment in [4, 8] {
      let (lean, reference) = both(bytes, alignment: alignment)
      #expect(lean == reference, "\(name), alignment \(alignment)")
    }
  }

  /// Reads each image's note through its address: `.loaderList` keeps any test from unloading an
  /// image (and its memory) meanwhile.
  @Test(.loaderList) func agreesOnEveryLoadedImage() {
    var compared = 0
    for image in LoadedImages.snapshot() {
      guard let id = image.buildID, let address = image.buildIDAddress else { continue }
      // The 16 bytes before the descriptor hold the GNU note's header and name.
      let start = UnsafeRawPointer(bitPattern: UInt(address - 16))
      let bytes = Array(UnsafeRawBufferPointer(start: start, count: 16 + id.bytes.count))
      let (lean, reference) = both(bytes, alignment: 4)
      #expect(lean == reference, "\(image.path)")
      #expect(lean == "\(id.bytes) at 16")
      compared += 1
    }
    #expect(compared > 3, "the executable, libc, the loader and the Swift runtime have build-ids")
  }
}
