import CImageLog
import CImageLogImage
import Glibc
import ImageLogTestSupport
import ImageReaders
import Testing
@testable import ImageLog

/// The C that describes an image and writes its line (CImageLogImage.h: the audit module behind
/// `imagelog run`, and the shim's snapshot walk) against the Swift side: `LoadLayout` for the same
/// program headers, `ImageFormatter.eventLine` (with pid and timing) for the same image, and
/// `TextEscaping` for the same bytes, byte for byte.
@Suite struct ImageLineTests {
  /// The C event line for `image`.
  static func cLine(_ image: il_image, _ options: il_line_options) -> [UInt8] {
    var image = image
    var options = options
    var buffer = [CChar](repeating: 0, count: 65536)
    return buffer.withUnsafeMutableBufferPointer { storage in
      var line = il_line(text: storage.baseAddress, capacity: storage.count, used: 0, truncated: 0)
      let length = il_image_line(&line, &image, &options)
      return storage[0..<length].map { UInt8(bitPattern: $0) }
    }
  }

  static let styles: [(ImageFormatStyle, Int32)] = [
    (.logger, Int32(IL_STYLE_LOGGER)), (.crash, Int32(IL_STYLE_CRASH)),
    (.unstrip, Int32(IL_STYLE_UNSTRIP)), (.json, Int32(IL_STYLE_JSON)),
  ]

  /// Every combination of style and options for one image: the mismatches, as text.
  static func compare(_ swiftImage: Image, _ cImage: il_image) -> [String] {
    var mismatches: [String] = []
    for (style, cStyle) in styles {
      for fullBuildIDs in [false, true] {
        for removed in [false, true] {
          for timing in [nil, (UInt64(1_234_567_890), UInt64(42_000))] as [(UInt64, UInt64)?] {
            for pid in [nil, Int32(4321)] as [Int32?] {
              for (withoutEvent, loadedFor) in [(false, nil), (true, nil), (false, UInt64(3_210_987))] as [(Bool, UInt64?)] {
                var options = il_line_options()
                // How long a removed image was loaded: `run` and `watch` event lines only.
                options.has_loaded_for = loadedFor == nil ? 0 : 1
                options.loaded_for_ns = loadedFor ?? 0
                options.style = cStyle
                options.full_build_ids = fullBuildIDs ? 1 : 0
                options.removed = removed ? 1 : 0
                options.without_event = withoutEvent ? 1 : 0
                options.timing = timing == nil ? 0 : 1
                options.since_start_ns = timing?.0 ?? 0
                options.step_ns = timing?.1 ?? 0
                options.labelled = pid == nil ? 0 : 1
                options.pid = Int64(pid ?? 0)
                // As `imagelog run` reports: timing on added images only. Without the event: the line alone
                // (`format`), as the crash report's Binary Images line is.
                let formatter = ImageFormatter(style: style, fullBuildIDs: fullBuildIDs)
                let event: ImageEvent = removed ? .removed : .added
                let imageTiming = removed ? nil : timing.map { ImageTiming(sinceStart: $0.0, loadDuration: $0.1) }
                let expected = withoutEvent
                  ? formatter.format(swiftImage, event: event, pid: pid, timing: imageTiming)
                  : formatter.eventLine(swiftImage, event: event, pid: pid, timing: imageTiming, loadedFor: loadedFor)
                let got = cLine(cImage, options)
                if got != Array(expected.utf8) {
                  mismatches.append("C:     \(String(decoding: got, as: UTF8.self))\nSwift: \(expected)")
                }
              }
            }
          }
        }
      }
    }
    return mismatches
  }

  /// Every image loaded in this process, described by the C (from the program headers the loader
  /// mapped it by) and by the snapshot's Swift builder, in every style: the same bytes. The walk holds
  /// the loader's lock, so no other test can unload an image meanwhile; `.loaderList` as every test
  /// that reads the loader's list.
  @Test(.loaderList) func everyLoadedImageGivesTheSameLineInCAndSwift() {
    final class Results { var compared = 0; var mismatches: [String] = [] }
    let results = Results()
    var walk = il_walk()
    _ = withUnsafeMutablePointer(to: &walk) { walkPointer in
      il_walk_objects(walkPointer, { object, walk, context in
        guard let object, let walk, let context else { return 1 }
        let results = Unmanaged<Results>.fromOpaque(context).takeUnretainedValue()
        guard let swiftImage = LoaderImageBuilder.image(from: object, index: walk.pointee.index) else { return 0 }
        var image = il_image()
        let phdrs = object.pointee.phdrs?.assumingMemoryBound(to: Elf64_Phdr.self)
        guard il_image_describe(phdrs, Int(object.pointee.phnum), UInt64(object.pointee.load_bias),
                                il_page_size(), &image) != 0 else {
          results.mismatches.append("C refused \(swiftImage.path)")
          return 0
        }
        results.compared += 1
        results.mismatches += swiftImage.path.withCString { path in
          image.path = path
          image.architecture = il_native_architecture()
          image.is_main = swiftImage.isMainExecutable ? 1 : 0
          return ImageLineTests.compare(swiftImage, image)
        }
        return 0
      }, Unmanaged.passUnretained(results).toOpaque())
    }
    #expect(results.compared >= 10, "the test process loads the Swift runtime and its dependencies")
    // The crash table's line for each image comes from the same C (CrashReporter.crashLine).
    for image in LoadedImages.snapshot() {
      var line = ""
      CrashReporter.crashLine(image) { line = String(cString: $0) }
      #expect(line == ImageFormatter(style: .crash).format(image), "\(image.path)")
    }
    #expect(results.mismatches.isEmpty, "\(results.mismatches.count) lines differ, first:\n\(results.mismatches.first ?? "")")
  }

  /// Paths that need escaping, images without a build-id, an empty path, short and long build-ids and a
  /// zero text size: the line writer against the formatter on hand-made images.
  @Test(arguments: ["/lib/plain.so", "/tmp/with space/lib \"q\" \\b.so", "", "/opt/ünïcödé/lib.so", "[vdso]",
                    "/tmp/libx\nRemoved: 0xdead (0x1) FORGED.so", "/tmp/\u{1b}[2J\u{9b}\u{7f}\t.so"])
  func handMadeImagesGiveTheSameLine(path: String) {
    for buildID in [nil, [UInt8](1...20), [UInt8](1...8), [UInt8](repeating: 0xab, count: 32)] as [[UInt8]?] {
      for textSize in [UInt64(0), 0x1234] {
        let swiftImage = Image(path: path, loadAddress: 0x7f00_0000_0000, loadBias: 0x7f00_0000_0000 &- 0x1000,
                               textRange: 0x7f00_0000_0000..<(0x7f00_0000_0000 + textSize),
                               loadRange: 0x7f00_0000_0000..<0x7f00_0001_0000, buildID: buildID.map(BuildID.init),
                               architecture: "x86_64", isMainExecutable: path.isEmpty,
                               buildIDAddress: buildID == nil ? nil : 0x7f00_0000_0368,
                               fileMappedRange: 0x7f00_0000_0000..<0x7f00_0000_8000)
        let bytes = buildID ?? []
        let mismatches = bytes.withUnsafeBufferPointer { idBytes in
          path.withCString { cPath in
            "x86_64".withCString { architecture in
              let image = il_image(path: cPath, architecture: architecture, load_bias: swiftImage.loadBias,
                                   load_address: swiftImage.loadAddress, text_end: swiftImage.textRange.upperBound,
                                   load_end: swiftImage.loadRange.upperBound,
                                   file_mapped_end: swiftImage.fileMappedRange.upperBound,
                                   build_id: buildID == nil ? nil : idBytes.baseAddress, build_id_size: bytes.count,
                                   build_id_address: swiftImage.buildIDAddress ?? 0, is_main: path.isEmpty ? 1 : 0)
              return Self.compare(swiftImage, image)
            }
          }
        }
        #expect(mismatches.isEmpty, "\(path): \(mismatches.count) lines differ, first:\n\(mismatches.first ?? "")")
      }
    }
  }

  /// Program headers fed to the C layout and to `LoadLayout` give the same span; the file-mapped end
  /// leaves out a PT_LOAD with no file bytes (all .bss), as the loader maps nothing from the file for it.
  @Test func programHeadersGiveTheSameLayoutInCAndSwift() throws {
    typealias Segment = (type: UInt32, flags: UInt32, vaddr: UInt64, filesz: UInt64, memsz: UInt64, align: UInt64)
    let tables: [(String, [Segment], UInt64)] = [
      ("text, data, bss-only", [(1, 5, 0, 0x1800, 0x1800, 0x1000), (1, 6, 0x2e00, 0x300, 0x400, 0x1000),
                                (1, 6, 0x4000, 0, 0x9000, 0x1000)], 0x4000),
      ("bss-only first", [(1, 6, 0x10000, 0, 0x2000, 0x1000), (1, 5, 0x20000, 0x123, 0x123, 0x1000)], 0x21000),
      ("no executable segment", [(1, 4, 0x400000, 0x100, 0x100, 0x200000)], 0x401000),
      ("odd alignment", [(1, 5, 0x1234, 0x10, 0x10, 3), (6, 4, 0x40, 0x38, 0x38, 8)], 0x2000),
      ("note and interp only", [(4, 4, 0x200, 0x20, 0x20, 4), (3, 4, 0x300, 0x1c, 0x1c, 1)], 0),
    ]
    for (name, segments, fileEndVMAddress) in tables {
      let swiftHeaders = segments.map {
        ProgramHeader(type: $0.type, flags: $0.flags, fileOffset: 0, vmAddress: $0.vaddr, fileSize: $0.filesz,
                      vmSize: $0.memsz, alignment: $0.align)
      }
      let cHeaders = segments.map {
        Elf64_Phdr(p_type: $0.type, p_flags: $0.flags, p_offset: 0, p_vaddr: $0.vaddr, p_paddr: $0.vaddr,
                   p_filesz: $0.filesz, p_memsz: $0.memsz, p_align: $0.align)
      }
      var layout = il_layout()
      let bias: UInt64 = 0x5555_0000_0000
      let found = il_image_layout(cHeaders, cHeaders.count, bias, 0x1000, &layout) != 0
      let swiftLayout = try LoadLayout(swiftHeaders)
      #expect(found == (swiftLayout != nil), "\(name)")
      guard let swiftLayout, found else { continue }
      #expect(layout.first_vaddr == swiftLayout.firstVMAddress, "\(name)")
      #expect(layout.text_end_vaddr == swiftLayout.textEndVMAddress, "\(name)")
      #expect(layout.load_end_vaddr == swiftLayout.loadEndVMAddress, "\(name)")
      #expect(layout.file_end == bias + fileEndVMAddress, "\(name)")
    }
  }

  static func escaped(_ bytes: [UInt8], json: Bool = false) -> String {
    var buffer = [CChar](repeating: 0, count: 1024)
    return buffer.withUnsafeMutableBufferPointer { storage in
      var line = il_line(text: storage.baseAddress, capacity: storage.count, used: 0, truncated: 0)
      bytes.withUnsafeBufferPointer { input in
        input.withMemoryRebound(to: CChar.self) { text in
          if json { il_line_json_string(&line, text.baseAddress, text.count) }
          else { il_line_escaped(&line, text.baseAddress, text.count) }
        }
      }
      return String(decoding: storage[0..<line.used].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
  }

  /// The text styles' escaping, case by case as the scheme states it (expected values written from
  /// the rules, not from our output): backslash, \n \r \t, other C0 and DEL as \xHH, each byte of
  /// ill-formed UTF-8 as \xHH, C1 controls as \u{HH}, everything else as is.
  @Test(arguments: [
    (Array("a\\b".utf8), "a\\\\b"),
    (Array("\n\r\t".utf8), "\\n\\r\\t"),
    (Array("libx\nRemoved: 0xdead (0x1) FORGED.so".utf8), "libx\\nRemoved: 0xdead (0x1) FORGED.so"),
    ([0x1b, 0x5b, 0x32, 0x4a, 0x00, 0x7f], "\\x1b[2J\\x00\\x7f"),
    ([0xff, 0xc3], "\\xff\\xc3"),
    ([0xc2, 0x9b, 0xc2, 0x80, 0xc2, 0x9f, 0xc2, 0xa0], "\\u{9b}\\u{80}\\u{9f}\u{a0}"),
    (Array("é😀 ok".utf8), "é😀 ok"),
    ([0xc0, 0xaf, 0xed, 0xa0, 0x80, 0xf4, 0x90, 0x80, 0x80], "\\xc0\\xaf\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80"),
    ([0x61, 0xe2, 0x82], "a\\xe2\\x82"),
    ([0xe2, 0x82, 0x41, 0xf0, 0x9f, 0x98], "\\xe2\\x82A\\xf0\\x9f\\x98"),
  ])
  func escapesAsSpecified(input: [UInt8], expected: String) {
    #expect(Self.escaped(input) == expected)
    #expect(TextEscaping.escaped(bytes: input) == expected, "the Swift escaper every other text style uses")
  }

  /// A path's bytes read as Swift reads them (`PathBytes`: a byte that is not UTF-8 kept as a scalar
  /// that stands for it) and escaped by jsonStringLiteral and TextEscaping: the C gives the same bytes.
  @Test func jsonStringsMatchTheSwiftEscaper() {
    let inputs: [[UInt8]] = [
      Array("plain".utf8), Array("q\"b\\n\nr\rt\t".utf8), [0x01, 0x1f, 0x7f, 0xc2, 0x9b],
      [0xff, 0xfe, 0x41], [0xe2, 0x82, 0x41], [0xf0, 0x9f, 0x98], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80],
      [0xe0, 0x80, 0x80], Array("é😀".utf8), [0xf0, 0x9f, 0x98, 0x80, 0x80],
      Array("/tmp/caf".utf8) + [0xe9] + Array("/prog".utf8), [0xef, 0x9e, 0x80, 0xef, 0x9f, 0xbf, 0xef, 0x9d, 0xbf],
    ]
    for input in inputs {
      #expect(Self.escaped(input, json: true) == jsonStringLiteral(PathBytes.string(input)), "\(input)")
      #expect(Self.escaped(input) == TextEscaping.escaped(PathBytes.string(input)), "\(input)")
    }
    // A byte that is not UTF-8 is the text \xHH in JSON, as in the text styles (written from the rule).
    #expect(Self.escaped(Array("caf".utf8) + [0xe9], json: true) == "\"caf\\\\xe9\"")
  }
}
