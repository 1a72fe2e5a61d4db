// What inspects other processes and files (ProcessImages, ProcessThreads, cores, unwinding, crash
// folders, formatting) is its own target, ProcessInspection, which the crash pipeline uses without the
// in-process library; `import ImageLog` still gives all of it, as before the split.
@_exported public import ProcessInspection
