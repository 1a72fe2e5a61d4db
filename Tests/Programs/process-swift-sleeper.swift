// A Swift program for the process tests: prints "ready" once its runtime is loaded, then waits in
// pause(2) until the test kills it.
#if canImport(Glibc)
import Glibc
#endif

let words = ["ready"].map { $0.uppercased().lowercased() }  // touch the Swift runtime
print(words[0])
fflush(stdout)
while true { pause() }
