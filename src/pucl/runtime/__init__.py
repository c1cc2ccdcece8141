"""How a process runs, whatever it computes: device, threads and determinism, progress,
clocks, interrupts, the libraries' environment defaults and CUDA-graph steps."""
