import Glibc
import ImageLog
import ImageLogTestSupport
import Testing

/// `ProcessThreads.capture`: every thread stopped, read and let go, checked against eu-stack on the
/// same process (its thread list and each thread's frame-0 pc), and against /proc afterwards.
@Suite struct ProcessThreadsTests {
  static let haveEuStack = haveTool("eu-stack") && haveTool("cc")

  #if arch(x86_64)
  static let pcRegister = 16, spRegister = 7
  #else
  static let pcRegister = 32, spRegister = 31
  #endif

  @Test(.enabled(if: haveEuStack, "needs eu-stack (elfutils) and cc"))
  func capturesEveryThreadAsEuStackSeesIt() throws {
    let directory = try makeTemporaryDirectory("imagelog-threads")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let program = try buildThreadsProgram(in: directory)
    let child = try RunningChild([program, "5"])
    try child.wait(for: "ready")
    try waitUntilThreadsBlocked(child.pid, count: 6)
    let captured = try ProcessThreads.capture(of: child.pid)
    #expect(noThreadStopped(child.pid), "a thread was left stopped")
    let stack = try runChild(["eu-stack", "-p", String(child.pid)])
    #expect(stack.exitCode == 0, "\(stack.error)")
    let theirs = EuStackThread.parse(stack.output)
    #expect(captured.threads.map(\.tid) == theirs.map(\.tid))
    #expect(captured.threads.map(\.tid) == threadIDs(of: child.pid))
    #expect(captured.threads.first?.tid == child.pid)  // the main thread first
    #expect(captured.threads.map(\.name) == ["process-threads", "reader-0", "sleeper-1", "waiter-2", "reader-3", "sleeper-4"])
    #expect(captured.threads.allSatisfy { $0.state == "S" && $0.problem == nil })
    #expect(captured.stoppedNanoseconds > 0)
    for (thread, peer) in zip(captured.threads, theirs) {
      let registers = try #require(thread.registerValues)
      #expect(registers[Self.pcRegister] == peer.frames.first?.address, "tid \(thread.tid): pc")
      // The copy starts at (or just below) the stack pointer and holds the frames above it.
      let sp = try #require(registers[Self.spRegister])
      let copy = try #require(thread.stack)
      #expect(copy.address <= sp && sp - copy.address <= 128)
      #expect(copy.bytes.count > 256)
    }
  }

  /// Threads created and ended all the time: each capture lists the threads it found, those that
  /// ended meanwhile marked, and leaves none stopped.
  @Test(.enabled(if: haveTool("python3"), "needs python3"))
  func threadsComingAndGoing() throws {
    let child = try RunningChild(["python3", "-c", threadChurnScript(then: "signal.pause()")])
    try child.wait(for: "ready")
    for _ in 0..<30 {
      let captured = try ProcessThreads.capture(of: child.pid)
      #expect(captured.threads.first?.tid == child.pid)
      for thread in captured.threads {
        #expect((thread.registerValues == nil) == (thread.problem != nil), "tid \(thread.tid)")
        if let problem = thread.problem { #expect(problem == ProcessThreads.vanished && thread.exited) }
      }
      #expect(noThreadStopped(child.pid))
    }
  }

  /// A process another tracer holds (a miniature debugger, Tests/Programs/process-tracer.c): the error
  /// names the tracer, and the process runs on, not stopped.
  @Test(.enabled(if: haveTool("cc"), "needs cc"))
  func alreadyTraced() throws {
    let directory = try makeTemporaryDirectory("imagelog-tracer")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let (parent, traced) = try startTracedProcess(in: directory)
    defer { kill(traced, SIGKILL) }
    #expect(throws: ProcessError.traced(pid: traced, tracer: parent.pid, tracerCommand: "process-tracer")) {
      try ProcessThreads.capture(of: traced)
    }
    #expect(noThreadStopped(traced))
  }

  @Test func kernelThreadZombieOwnAndMissingProcesses() throws {
    if (readFile("/proc/2/stat") ?? "").contains("(kthreadd)") {
      #expect(throws: ProcessError.kernelThread(pid: 2, command: "kthreadd", reading: .threads)) { try ProcessThreads.capture(of: 2) }
    }  // else PID 2 is not kthreadd (a PID namespace): the CLI test records the skip
    #expect(throws: ProcessError.ownProcess(pid: getpid())) { try ProcessThreads.capture(of: getpid()) }
    #expect(throws: ProcessError.noSuchProcess(pid: 99_999_999)) { try ProcessThreads.capture(of: 99_999_999) }
    // A child of this test that exited and is not reaped yet.
    let zombie = try RunningChild(["true"])
    try waitUntil("pid \(zombie.pid) is a zombie") { threadState(zombie.pid, zombie.pid) == "Z" }
    #expect(throws: ProcessError.zombie(pid: zombie.pid, command: "true", reading: .threads)) { try ProcessThreads.capture(of: zombie.pid) }
  }

  /// Thread names as the kernel keeps them (`comm`), read before the stop from each thread's stat line,
  /// where a name may hold spaces and parentheses, and the longest one (15 bytes) is whole.
  @Test(.enabled(if: haveTool("python3"), "needs python3"))
  func oddThreadNames() throws {
    let names = ["a) (b", "two words", ")(", "fifteen-chars-x", "end)"]
    // Each thread names itself, then meets the others at a barrier: past it every name is set. Then all
    // block (an event never set, the main thread in pause()) until the test ends the process.
    let script = """
      import ctypes, signal, threading
      libc = ctypes.CDLL(None)
      names = \(names)
      named = threading.Barrier(len(names) + 1)
      never = threading.Event()
      def run(name):
          libc.prctl(15, name.encode(), 0, 0, 0)
          named.wait()
          never.wait()
      for name in names: threading.Thread(target=run, args=(name,), daemon=True).start()
      named.wait()
      print("ready", flush=True)
      signal.pause()
      """
    let child = try RunningChild(["python3", "-c", script])
    try child.wait(for: "ready")
    let captured = try ProcessThreads.capture(of: child.pid)
    #expect(captured.threads.count == names.count + 1)
    for thread in captured.threads {
      // The kernel's own copy of the name.
      let comm = readFile("/proc/\(child.pid)/task/\(thread.tid)/comm").map { String($0.dropLast()) }
      #expect(thread.name == comm, "tid \(thread.tid)")
      #expect(thread.registerValues != nil, "tid \(thread.tid)")
    }
    #expect(Set(captured.threads.compactMap(\.name)) == Set(names + ["python3"]))
    #expect(noThreadStopped(child.pid))
  }

  /// A process whose main thread called pthread_exit: its leader is a zombie, its other thread runs on
  /// and is read, its stack copied; the main thread is listed with why it has no stack.
  @Test(.enabled(if: haveTool("cc"), "needs cc"))
  func mainThreadExitedOthersRunOn() throws {
    let directory = try makeTemporaryDirectory("imagelog-leader")
    defer { _ = try? runChild(["rm", "-rf", directory]) }
    let source = directory + "/leader.c"
    try writeFile(source, """
      #include <pthread.h>
      #include <stdio.h>
      #include <unistd.h>
      static void *run(void *unused) { for (;;) pause(); return unused; }
      int main(void) { pthread_t t; pthread_create(&t, 0, run, 0); printf("ready\\n"); fflush(stdout); pthread_exit(0); }
      """)
    let build = try runChild(["cc", "-pthread", source, "-o", directory + "/leader"])
    try #require(build.exitCode == 0, "cc: \(build.error)")
    let child = try RunningChild([directory + "/leader"])
    try child.wait(for: "ready")
    try waitUntil("the main thread of \(child.pid) is a zombie and its other thread sleeps") {
      let tids = threadIDs(of: child.pid)
      return tids.count == 2 && threadState(child.pid, child.pid) == "Z" && threadState(child.pid, tids[1]) == "S"
    }
    let captured = try ProcessThreads.capture(of: child.pid)
    #expect(captured.threads.count == 2)
    #expect(captured.threads.first?.problem == ProcessThreads.mainThreadExited)
    #expect(captured.threads.last?.registerValues != nil)
    // Its stack is copied through its own task: the main thread's no longer reaches the memory.
    #expect((captured.threads.last?.stack?.bytes.count ?? 0) > 256)
    #expect(noThreadStopped(child.pid))
  }
}
