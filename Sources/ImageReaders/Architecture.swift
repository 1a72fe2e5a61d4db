/// An architecture, named as crash tooling names it (`x86_64`, `arm64`, `i386`, `armv7`...): the
/// names `ELFHeader`'s and Mach-O's readers give, Apple's Binary Images lines write, and `lipo`
/// takes. The other spellings tools use for the same architecture are read here, once.
public struct Architecture: Hashable, Sendable, CustomStringConvertible {
  /// The canonical name.
  public let name: String

  /// The architecture of this canonical name (as the readers give it).
  public init(_ name: String) { self.name = name }

  /// A name as a person or another tool may write it on a command line: LLVM's and Debian's
  /// (`aarch64`, `amd64`, `x86-64`, `i686`, `powerpc64le`) become the canonical one; others are kept.
  public init(commandLine name: String) {
    switch name.lowercased() {
    case "aarch64": self.init("arm64")
    case "amd64", "x86-64": self.init("x86_64")
    case "i486", "i586", "i686", "x86": self.init("i386")
    case "powerpc": self.init("ppc")
    case "powerpc64": self.init("ppc64")
    case "powerpc64le": self.init("ppc64le")
    default: self.init(name)
    }
  }

  /// The architecture a crash report names in its header (`Code Type: ARM-64 (Native)`, the `.ips`
  /// `cpuType`, the backtracer's `Platform:`, the machine of `OS Version: Linux ... aarch64`): its first
  /// word, in any case; `nil` for a word that names none.
  public init?(reportName text: some StringProtocol) {
    let word = text.split(separator: " ").first.map { $0.lowercased() } ?? ""
    switch word {
    case "arm-64", "arm64", "aarch64": self.init("arm64")
    case "arm64e": self.init("arm64e")
    case "x86-64", "x86_64": self.init("x86_64")
    case "x86_64h": self.init("x86_64h")
    case "x86", "i386": self.init("i386")
    case "arm", "armv7": self.init("armv7")
    case "armv7s": self.init("armv7s")
    case "armv7k": self.init("armv7k")
    case "arm64_32": self.init("arm64_32")
    default: return nil
    }
  }

  /// True for the names a Binary Images line writes after the image name (`+MyApp arm64  <uuid>`).
  public var isImageLineName: Bool {
    switch name {
    case "arm64", "arm64e", "x86_64", "x86_64h", "i386", "armv7", "armv7s", "armv7k", "arm64_32", "armv6", "armv7m",
         "armv7em", "ppc": true
    default: false
    }
  }

  /// The other member of a family whose code runs as each other's (`arm64e` and `arm64`, `x86_64h` and
  /// `x86_64`): a slice of one serves a report of the other when no exact slice exists.
  public var sibling: Architecture? {
    switch name {
    case "arm64e": Architecture("arm64")
    case "arm64": Architecture("arm64e")
    case "x86_64h": Architecture("x86_64")
    case "x86_64": Architecture("x86_64h")
    default: nil
    }
  }

  /// The machine name Linux's `uname` gives (`aarch64` for `arm64`).
  public var kernelMachine: String { name == "arm64" ? "aarch64" : name }

  public var description: String { name }
}
