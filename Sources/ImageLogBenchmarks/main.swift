// `make bench` entry point: each benchmark measures imagelog and a real peer side by side.
print("no benchmarks yet")
