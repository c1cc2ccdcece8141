"""Where a fit's time and memory go: seconds, and optionally the peak resident memory,
of each named step (the prior, each encoder's pretraining, PUPL, the heads)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil


class StepClock:
    """`with clock("prior"): ...` records the step's wall seconds in `seconds`; with
    `memory=True` also the highest resident set size of this process while it ran
    (sampled every `interval` seconds, in bytes) in `peak_rss`. A step named twice
    (one per encoder) adds up its seconds and keeps the higher peak."""

    def __init__(self, memory: bool = False, interval: float = 0.05):
        self.memory, self.interval = memory, interval
        self.seconds: dict[str, float] = {}
        self.peak_rss: dict[str, int] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        stop, peak = threading.Event(), [0]
        sampler = threading.Thread(target=self._sample, args=(stop, peak), daemon=True)
        if self.memory:
            sampler.start()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            if self.memory:
                stop.set()
                sampler.join()
                self.peak_rss[name] = max(self.peak_rss.get(name, 0), peak[0])

    def _sample(self, stop: threading.Event, peak: list[int]) -> None:
        process = psutil.Process()
        while True:
            peak[0] = max(peak[0], process.memory_info().rss)
            if stop.wait(self.interval):
                peak[0] = max(peak[0], process.memory_info().rss)
                return
