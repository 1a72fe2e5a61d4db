import ProcessInspection
import ImageReaders
import Snapshot

extension ProcessSnapshot {
  /// One line per address: `0x…  name + offset (in image)`, with file:line and inlined frames when known.
  func addressLines(into out: inout UTF8Output, afterEachLine: (inout UTF8Output) -> Void) {
    // Frames are read in place through buffer pointers: copies of the frames (or of their functions)
    // would retain, and so touch, every string of every frame.
    for thread in threads {
      thread.frames.withUnsafeBufferPointer { frames in
        for index in frames.indices {
          out.appendPaddedHex(frames[index].address)
          if case .symbolicated = frames[index].symbols.status {
            for inlined in frames[index].symbols.inlinedFunctions {
              appendFunction(name: inlined.name, offset: inlined.offset, image: frames[index].symbols.imageName,
                             file: inlined.file, line: inlined.line, column: inlined.column,
                             isInlined: inlined.isInlined, into: &out)
              out.append("\n                  " as StaticString)
            }
            if frames[index].symbols.hasFunction {
              appendFunction(name: frames[index].symbols.realFunction.name, offset: frames[index].symbols.realFunction.offset,
                             image: frames[index].symbols.imageName, file: frames[index].symbols.realFunction.file,
                             line: frames[index].symbols.realFunction.line, column: frames[index].symbols.realFunction.column,
                             isInlined: frames[index].symbols.realFunction.isInlined, into: &out)
            }
          } else {
            appendUnresolved(frames[index].symbols, into: &out)
          }
          out.append(byte: UInt8(ascii: "\n"))
          afterEachLine(&out)
        }
      }
    }
  }

  private func appendFunction(name: String?, offset: UInt64?, image: String?, file: String?, line: Int?, column: Int?,
                              isInlined: Bool, into out: inout UTF8Output) {
    out.append(byte: UInt8(ascii: " "))
    if let name { out.appendEscaped(name) } else { out.append("???" as StaticString) }
    if let offset { out.append(" + " as StaticString); out.appendDecimal(offset) }
    out.append(" (in " as StaticString)
    if let image { out.appendEscaped(image) } else { out.append("???" as StaticString) }
    out.append(byte: UInt8(ascii: ")"))
    if let file, let line {
      out.append(" (" as StaticString); out.appendEscaped(file); out.append(byte: UInt8(ascii: ":"))
      out.appendDecimal(line); out.append(byte: UInt8(ascii: ":"))
      out.appendDecimal(column ?? 0); out.append(byte: UInt8(ascii: ")"))
    }
    if isInlined { out.append(" [inlined]" as StaticString) }
  }

  private func appendUnresolved(_ result: borrowing FrameSymbols, into out: inout UTF8Output) {
    let image = result.imageName.map(TextEscaping.escaped) ?? "???"
    switch result.status {
    case .symbolicated: break
    case let .mismatch(reportID, fileID, path):
      out.append(" ??? [UUID mismatch: report \(reportID), file \(fileID) \(TextEscaping.escaped(path))]")
    case .noImage: out.append(" ??? (no image contains this address)" as StaticString)
    case .missingImage: out.append(" ??? (in \(image)) [image file not found]")
    case .noSymbol: out.append(" ??? (in \(image)) + \(result.imageOffset ?? 0)")
    case .notLookedUp: break  // the line stays as the report wrote it
    case .noModule: out.append(" ??? (no module)" as StaticString)
    case .otherBuild: out.append(" ??? (in \(image)) [another build]")
    }
  }
}
