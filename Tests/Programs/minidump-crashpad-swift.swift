// A Swift program that crashes in Swift code with Crashpad's handler ready to dump it: built with
// Tests/Programs/minidump-crashpad.c linked in, its main renamed minidump_crashpad_main, and run as
//   minidump-crashpad-swift HANDLER DATABASE return [HANDLER-ARGUMENT...]
// That C main installs the signal handler (SIGILL, a Swift trap, among its signals), starts the named
// threads blocked in system calls, prints "ready" and returns. Then an array index out of range, three
// calls deep in a comparator that sorted(by:) calls from the standard library, traps inside the
// runtime (SIGILL on x86_64, SIGTRAP on arm64). Build it without optimisation (-Onone) so each
// function keeps its frame.

@_silgen_name("minidump_crashpad_main")
func minidumpCrashpadMain(_ count: Int32, _ arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32

@inline(never) func swiftCrashDeep(_ values: [Int], _ index: Int) -> Int {
  values[index]
}

@inline(never) func swiftCrashMiddle(_ values: [Int], _ index: Int) -> Int {
  swiftCrashDeep(values, index + 1)
}

@inline(never) func swiftCompare(_ a: Int, _ b: Int) -> Bool {
  swiftCrashMiddle([a, b], 2) < b
}

let status = minidumpCrashpadMain(CommandLine.argc, CommandLine.unsafeArgv)
if status == 0 {
  print([3, 1, 2].sorted(by: swiftCompare))
}
