import Glibc
import ImageLogTestSupport
import Testing
@testable import ImageLog
@testable import ProcessInspection

/// `ProcessImages` against `eu-unstrip -n -p PID` on the same live process: start, size, build-id
/// and build-id address for every ELF module.
@Suite(.serialized) struct ProcessImagesTests {
  static let haveUnstrip = haveTool("eu-unstrip")

  /// Compares our snapshot with eu-unstrip's modules. eu-unstrip also lists non-ELF mapped files
  /// (locale archives, caches) with no build-id; those are not images and must not be in ours.
  func expectMatchesUnstrip(pid: pid_t, _ comment: String) throws -> [Image] {
    let images = try ProcessImages.snapshot(of: pid)
    let unstrip = try runTool(["eu-unstrip", "-n", "-p", String(pid)])
    try #require(unstrip.status == 0, "eu-unstrip failed on \(comment)")
    let modules = ProcessUnstripModule.parse(unstrip.output)
    let ours = images.map {
      ProcessUnstripModule(start: $0.fileMappedRange.lowerBound,
                    size: $0.fileMappedRange.upperBound - $0.fileMappedRange.lowerBound,
                    buildID: $0.buildID?.hex, buildIDAddress: $0.buildIDAddress, name: "")
    }
    func key(_ module: ProcessUnstripModule) -> String { module.description.split(separator: " ").prefix(2).joined(separator: " ") }
    let ourKeys = Set(ours.map(key))
    for module in modules where module.buildID != nil {
      #expect(ourKeys.contains(key(module)), "\(comment): eu-unstrip has \(module), we do not")
    }
    let theirKeys = Set(modules.map(key))
    for (module, image) in zip(ours, images) {
      #expect(theirKeys.contains(key(module)), "\(comment): we have \(module) \(image.path), eu-unstrip does not")
    }
    #expect(images.filter(\.isMainExecutable).count == 1, "\(comment): exactly one main executable")
    #expect(images.contains { $0.path == "[vdso]" }, "\(comment): the vDSO is listed")
    return images
  }

  @Test(.enabled(if: haveUnstrip, "eu-unstrip (elfutils) is not installed"))
  func sleepMatchesUnstrip() throws {
    let child = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
    defer { child.stop() }
    try child.wait(for: "ready")
    try waitUntilSleeping(child.pid, in: "sleep")  // the exec and the loader are done
    let images = try expectMatchesUnstrip(pid: child.pid, "sleep")
    #expect(images.first { $0.isMainExecutable }?.name == "sleep")
    #expect(images.contains { $0.name.hasPrefix("libc.so") })
  }

  @Test(.enabled(if: haveUnstrip && haveTool("python3"), "eu-unstrip or python3 missing"))
  func pythonWithSSLAndSQLiteMatchesUnstrip() throws {
    let child = try RunningChild(["python3", "-c", "import signal, ssl, sqlite3; print('ready', flush=True); signal.pause()"])
    defer { child.stop() }
    try child.wait(for: "ready")
    let images = try expectMatchesUnstrip(pid: child.pid, "python3")
    #expect(images.contains { $0.name.hasPrefix("libssl") || $0.name.hasPrefix("_ssl") })
    #expect(images.contains { $0.name.hasPrefix("_sqlite3") })
  }

  @Test(.enabled(if: haveUnstrip && haveTool("swiftc"), "eu-unstrip or swiftc missing"))
  func swiftProgramMatchesUnstrip() throws {
    let directory = try makeTemporaryDirectory("process-swift")
    defer { processRemoveTree(directory) }
    let program = "\(directory)/sleeper"
    let build = try runTool(["swiftc", "\(packageRoot)/Tests/Programs/process-swift-sleeper.swift", "-o", program])
    try #require(build.status == 0, "swiftc failed")
    let child = try RunningChild([program])
    defer { child.stop() }
    try child.wait(for: "ready")
    let images = try expectMatchesUnstrip(pid: child.pid, "Swift program")
    #expect(images.contains { $0.name == "libswiftCore.so" })
  }

  /// An ELF32 (i386) static program on the 64-bit kernel: its header, build-id and 32-bit vDSO.
  @Test(.enabled(if: haveUnstrip && Self.canBuild32Bit, "cannot build a -m32 program (gcc -m32) or no IA-32 emulation"))
  func elf32ProcessMatchesUnstrip() throws {
    let directory = try makeTemporaryDirectory("process-elf32")
    defer { processRemoveTree(directory) }
    let program = "\(directory)/sleeper32"
    let build = try runTool(["gcc", "-m32", "-nostdlib", "-static", "-fno-pic", "-no-pie", "-Wl,--build-id",
                             "\(packageRoot)/Tests/Programs/process-elf32-sleeper.c", "-o", program])
    try #require(build.status == 0)
    let child = try RunningChild([program])
    defer { child.stop() }
    try child.wait(for: "ready")  // static, no loader: everything is mapped once it runs
    let images = try expectMatchesUnstrip(pid: child.pid, "ELF32 program")
    #expect(images.allSatisfy { $0.architecture == "i386" })
  }

  static let canBuild32Bit: Bool = {
    guard let directory = try? makeTemporaryDirectory("process-m32") else { return false }
    defer { processRemoveTree(directory) }
    let built = try? runTool(["gcc", "-m32", "-nostdlib", "-static", "-fno-pic", "-no-pie",
                              "\(packageRoot)/Tests/Programs/process-elf32-sleeper.c", "-o", "\(directory)/p"])
    guard built?.status == 0 else { return false }
    // Says "ready" when the kernel has IA-32 emulation; without it, it cannot start.
    guard let run = try? RunningChild(["\(directory)/p"]) else { return false }
    defer { run.stop() }
    return run.readLine() == "ready"
  }()

  /// With memory reads switched off, the files give the same images, and the vDSO (which has no
  /// file) comes from our own copy of it.
  @Test func fileFallbackAgreesWithMemory() throws {
    let child = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
    defer { child.stop() }
    try child.wait(for: "ready")
    try waitUntilSleeping(child.pid, in: "sleep")
    let fromMemory = try ProcessImages.snapshot(of: child.pid)
    let fromFiles = try ProcessImages.snapshot(of: child.pid, readingMemory: false)
    #expect(fromFiles == fromMemory)
  }

  /// A library deleted after loading: read from memory, so its build-id is still right.
  @Test(.enabled(if: haveTool("cc") && haveTool("readelf"), "cc or readelf missing"))
  func deletedLibraryKeepsItsBuildID() throws {
    let directory = try makeTemporaryDirectory("process-deleted")
    defer { processRemoveTree(directory) }
    let library = "\(directory)/libgone.so"
    let source = "\(packageRoot)/Tests/Programs/process-dlopen-loop.c"
    try #require(try runTool(["sh", "-c", "echo 'int gone(void){return 1;}' | cc -shared -fPIC -Wl,--build-id -x c - -o \(library)"]).status == 0)
    try #require(try runTool(["cc", source, "-o", "\(directory)/loop", "-ldl"]).status == 0)
    let notes = try runTool(["readelf", "-n", library]).output
    let expected = notes.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last.map(String.init)
    // hold: load once and keep it loaded
    let child = try RunningChild(["\(directory)/loop", "hold", library])
    defer { child.stop() }
    try child.wait(for: "loaded")
    unlink(library)
    let images = try ProcessImages.snapshot(of: child.pid)
    let gone = images.first { $0.path.hasPrefix(library) }
    #expect(gone?.path == "\(library) (deleted)")
    #expect(gone?.buildID?.hex == expected)
  }

  /// A library only visible in the process's own mount namespace: with memory reads off, the file
  /// is still found, through /proc/PID/map_files or /proc/PID/root, and gives the right build-id.
  @Test(.enabled(if: getuid() == 0 && haveTool("unshare") && haveTool("cc"),
                 "needs root, unshare(1) and cc for a private mount namespace"))
  func otherMountNamespaceIsReadThroughProc() throws {
    let directory = try makeTemporaryDirectory("process-mntns")
    defer { processRemoveTree(directory) }
    let source = "\(packageRoot)/Tests/Programs/process-dlopen-loop.c"
    try #require(try runTool(["sh", "-c", "echo 'int hidden(void){return 7;}' | cc -shared -fPIC -Wl,--build-id -x c - -o \(directory)/libhidden.so && mkdir \(directory)/private"]).status == 0)
    try #require(try runTool(["cc", source, "-o", "\(directory)/loop", "-ldl"]).status == 0)
    let notes = try runTool(["readelf", "-n", "\(directory)/libhidden.so"]).output
    let expected = notes.split(separator: "\n").first { $0.contains("Build ID:") }?.split(separator: " ").last.map(String.init)
    let child = try RunningChild(["unshare", "-m", "sh", "-c",
      "mount -t tmpfs none \(directory)/private && cp \(directory)/libhidden.so \(directory)/private/ && exec \(directory)/loop hold \(directory)/private/libhidden.so"],
      errorPath: "\(directory)/stderr")
    defer { child.stop() }
    do { try child.wait(for: "loaded") } catch {
      // Root without CAP_SYS_ADMIN (a container) may not make a mount namespace or mount in it.
      let reason = (readFile("\(directory)/stderr") ?? "").split(separator: "\n").last.map(String.init) ?? "no message"
      try Test.cancel("cannot mount a tmpfs in a new mount namespace here (\(reason)); skipped")
    }
    #expect(access("\(directory)/private/libhidden.so", F_OK) != 0, "the file is not visible from our namespace")
    let images = try ProcessImages.snapshot(of: child.pid, readingMemory: false)
    let hidden = images.first { $0.path == "\(directory)/private/libhidden.so" }
    #expect(hidden?.buildID?.hex == expected)
    #expect(hidden == (try ProcessImages.snapshot(of: child.pid)).first { $0.path == hidden?.path })
  }

  @Test func errors() throws {
    // A PID above pid_max cannot exist.
    #expect(throws: ProcessError.noSuchProcess(pid: 99_999_999)) { try ProcessImages.snapshot(of: 99_999_999) }
    // PID 2 is kthreadd on Linux (in the initial PID namespace).
    if let stat = try? runTool(["cat", "/proc/2/stat"]), stat.output.contains("(kthreadd)") {
      #expect(throws: ProcessError.kernelThread(pid: 2, command: "kthreadd", reading: .images)) { try ProcessImages.snapshot(of: 2) }
    }
    // A zombie: our own child that has exited and that we have not reaped.
    let zombie = try RunningChild(["sh", "-c", "exec true"])
    var info = siginfo_t()
    waitid(P_PID, id_t(zombie.pid), &info, WEXITED | WNOWAIT)
    #expect(throws: ProcessError.zombie(pid: zombie.pid, command: "true", reading: .images)) { try ProcessImages.snapshot(of: zombie.pid) }
    zombie.reap()
    #expect(ProcessError.zombie(pid: 7, command: "true", reading: .images).description == "pid 7: true is a zombie (exited, not yet reaped): it has no images")
    #expect(ProcessError.exited(pid: 7, reading: .images).description == "pid 7: the process exited while its images were being read")
    // A process that has exited and been reaped between two reads: gone, and it existed.
    let quick = try RunningChild(["true"])
    quick.reap()
    #expect(throws: ProcessError.noSuchProcess(pid: quick.pid)) { try ProcessImages.snapshot(of: quick.pid) }
  }

  /// Maps read inside `execve` (the new address space holds only the stack) list no image: an error
  /// that says so, never an empty list (`imagelog pid` printed one empty line and exited 0). The maps
  /// are the real ones of a live child with everything but its stack left out, so this is exactly
  /// what the window shows, every time.
  @Test func mapsWithoutImagesOfALiveProcess() throws {
    let child = try RunningChild(["sh", "-c", "echo ready; exec sleep 600"])
    #expect(child.readLine() == "ready")
    // "ready" comes before the exec: the whole maps are read once sleep runs, not inside its exec.
    try waitUntilSleeping(child.pid, in: "sleep")
    let maps = try ProcessImages.readMappings(of: child.pid)
    let stackOnly = maps.filter { $0.path == "[stack]" }
    try #require(stackOnly.count == 1, "the child's maps have a [stack] line")
    #expect(throws: ProcessError.noImages(pid: child.pid)) {
      try ProcessImages.images(of: child.pid, mappings: stackOnly, readingMemory: true)
    }
    #expect(ProcessError.noImages(pid: 7).description
            == "pid 7: no images mapped: the process is starting (in exec) or exiting")
    #expect(try ProcessImages.images(of: child.pid, mappings: maps, readingMemory: true).isEmpty == false)
  }
}

extension ProcessImagesTests {
  /// Our own process read from outside agrees with the in-process snapshot (dl_iterate_phdr) on every
  /// field but the path, which the loader spells as it was asked (/lib64/...) and maps as resolved.
  /// `.loaderList`: no test loads or unloads a library between the two reads.
  @Test(.loaderList) func ownProcessAgreesWithTheInProcessSnapshot() throws {
    let (inside, outside) = try withUnchangedLoaderList { (LoadedImages.snapshot(), try ProcessImages.snapshot(of: getpid())) }
    #expect(inside.count == outside.count)
    for image in inside {
      guard let other = outside.first(where: { $0.loadAddress == image.loadAddress }) else {
        Issue.record("\(image.path) at 0x\(String(image.loadAddress, radix: 16)) is not in the /proc view")
        continue
      }
      #expect(other.loadBias == image.loadBias, "\(image.path)")
      #expect(other.textRange == image.textRange, "\(image.path)")
      #expect(other.loadRange == image.loadRange, "\(image.path)")
      #expect(other.fileMappedRange == image.fileMappedRange, "\(image.path)")
      #expect(other.buildID == image.buildID, "\(image.path)")
      #expect(other.buildIDAddress == image.buildIDAddress, "\(image.path)")
      #expect(other.architecture == image.architecture, "\(image.path)")
      #expect(other.isMainExecutable == image.isMainExecutable, "\(image.path)")
      // The same file once symbolic links are resolved (libstdc++.so.6 -> libstdc++.so.6.0.30).
      func resolved(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
      }
      #expect(resolved(other.path) == resolved(image.path), "\(image.path) vs \(other.path)")
    }
  }
}

extension ProcessImagesTests {
  /// An ELF file only mapped to be read (as a symbolizer or this process's own `MappedFile` maps one) is
  /// not an image: nothing of it is executable. /usr/bin/true is mapped whole, read-only, at offset 0.
  @Test func aFileMappedToBeReadIsNotAnImage() throws {
    let fd = open("/usr/bin/true", O_RDONLY | O_CLOEXEC)
    try #require(fd >= 0, "/usr/bin/true cannot be opened here")
    defer { close(fd) }
    var status = stat()
    try #require(fstat(fd, &status) == 0)
    let size = Int(status.st_size)
    let mapping = try #require(mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), "mmap failed")
    try #require(mapping != MAP_FAILED)
    defer { munmap(mapping, size) }
    let address = UInt64(UInt(bitPattern: mapping))
    let maps = try ProcessImages.readMappings(of: getpid())
    try #require(maps.contains { $0.start == address && $0.fileOffset == 0 }, "the mapping is in /proc/self/maps")
    let images = try ProcessImages.images(of: getpid(), mappings: maps, readingMemory: true)
    #expect(!images.contains { $0.loadAddress == address }, "a read-only mapping of /usr/bin/true was taken for an image")
    #expect(images.contains { $0.isMainExecutable }, "the loaded images are still found")
  }
}
