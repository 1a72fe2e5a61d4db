// symbolicate test program: crashes in the way argv[1] names.
@inline(never) func outOfRange(_ values: [Int], _ index: Int) -> Int { values[index] }
@inline(never) func fail(_ message: String) -> Never { fatalError(message) }
@inline(never) func unwrap(_ value: Int?) -> Int { value! }
struct Crasher {
  @inline(never) func run(_ mode: String) -> Int {
    switch mode {
    case "index": return outOfRange([1, 2, 3], CommandLine.arguments.count + 5)
    case "fatal": fail("symbolicate test fatalError")
    case "unwrap": return unwrap(CommandLine.arguments.count > 10 ? 1 : nil)
    case "null": return Int(symbolicate_null_deref(nil))
    default: return 0
    }
  }
}
print(Crasher().run(CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : ""))
