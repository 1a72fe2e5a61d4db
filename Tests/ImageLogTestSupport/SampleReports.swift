/// Crash reports written by hand after the real ones, shared by the tests of several targets (the parsers',
/// the JSON document's): each test reads its expected values from these lines.
public enum SampleReports {
  /// An Apple `.crash` (iOS): two threads, registers, and Binary Images rows in each of the forms
  /// Apple writes (padded addresses, dashed and compact UUIDs, `(*)`, `???`, a `+` main executable).
  public static let appleCrash = """
    Incident Identifier: 6156F33D-7F2B-4C4A-9E2C-3E6F0C1D2E3F
    Process:             MyApp [1234]
    Path:                /private/var/containers/Bundle/Application/ABC/MyApp.app/MyApp
    Code Type:           ARM-64 (Native)
    OS Version:          iPhone OS 16.0 (20A362)
    Exception Type:  EXC_CRASH (SIGABRT)
    Crashed Thread:  0

    Thread 0 name:  Dispatch queue: com.apple.main-thread
    Thread 0 Crashed:
    0   libsystem_kernel.dylib        \t0x00000001a2b3c4d8 __pthread_kill + 8
    1   MyApp                         \t0x000000010064db08 0x100104000 + 5544712
    2   Google Chrome Framework       \t0x0000000110002000 0x110000000 + 8192

    Thread 1:
    0   libsystem_pthread.dylib       \t0x00000001e1c3e0c4 start_wqthread + 0

    Thread 0 crashed with ARM Thread State (64-bit):
        x0: 0x0000000000000000   x1: 0x0000000000000000

    Binary Images:
    0x100104000 - 0x100657fff MyApp arm64  <c299a741488a3656a410a7be59926b13> /private/var/containers/Bundle/Application/ABC/MyApp.app/MyApp
           0x1a2b10000 -        0x1a2b47fff libsystem_kernel.dylib arm64e  <5e4f7d4a-9b2c-3f1e-8d7a-1b2c3d4e5f60> /usr/lib/system/libsystem_kernel.dylib
    0x110000000 - 0x110ffffff Google Chrome Framework arm64  <0123456789ABCDEF0123456789ABCDEF> /Applications/Google Chrome.app/Framework
    0x1e1c3d000 - 0x1e1c49fff libsystem_pthread.dylib (*) <AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE> /usr/lib/system/libsystem_pthread.dylib
    0x0 - 0xffffffffffffffff ??? (*) <00000000-0000-0000-0000-000000000000> ???
    0x10d5c1000 -        0x10d5c4fff +com.example.app (1.0 - 1) <C299A741-488A-3656-A410-A7BE59926B13> /Applications/Example.app/Contents/MacOS/Example

    EOF
    """

  /// Swift's backtracer text (`SWIFT_BACKTRACE=...,symbolicate=off`): two named threads, the first crashed,
  /// and one image.
  public static let swiftBacktrace = """
    *** Program crashed: Bad pointer dereference at 0x0000000000000000 ***

    Thread 0 "crasher" crashed:

    0      0x000055851ccfb91c

    Thread 1 "worker":

    0      0x00007f0000001010

    Images (12 omitted):

    0x000055851ccfa000–0x000055851ccfbd38 167ddc45f2bbbc485434077cf70e879175008f62 crasher      /tmp/crasher

    """
}
