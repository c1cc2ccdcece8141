"""Benchmarks: speed and memory figures, each a ratio measured side by side in one run.
Not part of the test suite; `make bench` (or `python -m benchmarks`) runs them all."""
