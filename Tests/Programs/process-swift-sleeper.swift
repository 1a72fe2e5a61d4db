// A Swift program for the process tests: prints "ready" once its runtime is loaded, then sleeps.
#if canImport(Glibc)
import Glibc
#endif

let words = ["ready"].map { $0.uppercased().lowercased() }  // touch the Swift runtime
print(words[0])
fflush(stdout)
sleep(600)
