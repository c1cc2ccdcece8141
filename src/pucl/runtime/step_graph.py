"""A training step replayed as one CUDA graph.

On a GPU, a step of a small model (LeNet-5 at a batch of 1,024) is a few hundred tiny
kernel launches, and launching them costs more than running them. `GraphedStep` records
the step once per input shape and then replays it with one launch. Anywhere else (the
CPU, or with graphs switched off by `eager()`) it calls the step as it is: the CPU runs
the very function that is recorded on a GPU.

What a step must respect to be recorded (CUDA's rules for capture):
- it reads its batch only through the tensors passed in, which are copied into fixed
  buffers before each replay;
- it draws no random numbers: the caller draws them outside and passes them in
  (`AffineJitter.draw` / `apply`), so the random stream is the eager one;
- it reads nothing back to the host and makes tensors of fixed shapes;
- models and optimiser state are updated in place, so their memory stays where the
  graph recorded it; the optimiser must be capturable (`pucl.runtime.device.adam` is, on CUDA);
- the tensor it returns is overwritten by the next replay: use it (queue work on it)
  before the next call.

The first `warmup` calls of each shape run eagerly on a side stream, as CUDA graphs
want (lazy state such as the optimiser's moments is created there); each is a real
step. Recording runs nothing, so the step that is recorded is then replayed at once:
every call is exactly one step. If recording fails (a step that breaks a rule above),
a warning says so and every step of the process runs eagerly from then on (a failed
capture can leave CUDA's allocator in a state later captures should not build on).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from pucl.runtime import work

_enabled = [True]


@dataclass
class GraphCounts:
    """Steps recorded as CUDA graphs and steps that could not be, in this process (what a
    benchmark reports beside its timings)."""

    recorded: int = 0
    failed: int = 0


COUNTS = GraphCounts()


@contextlib.contextmanager
def eager() -> Iterator[None]:
    """Steps made inside run without graphs (to compare the two, or to debug a step)."""
    _enabled.append(False)
    try:
        yield
    finally:
        _enabled.pop()


class GraphedStep:
    def __init__(self, step: Callable[..., torch.Tensor], warmup: int = 2):
        self.step = step
        self.warmup = warmup
        self.captures = 0  # graphs recorded: one per input shape
        self._eager_calls: dict[tuple, int] = {}
        self._graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, list[torch.Tensor],
                                        torch.Tensor]] = {}
        self._work: dict[tuple, float] = {}  # MACs a shape's capture counted (runtime.work)
        self._stream: torch.cuda.Stream | None = None
        self._failed = False

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        if self._failed or not _enabled[-1] or not inputs[0].is_cuda:
            return self.step(*inputs)
        key = tuple((tuple(t.shape), t.dtype) for t in inputs)
        recorded = self._graphs.get(key)
        if recorded is None:
            if self._eager_calls.get(key, 0) < self.warmup:
                self._eager_calls[key] = self._eager_calls.get(key, 0) + 1
                return self._on_side_stream(inputs)
            recorded = self._record(key, inputs)
            if recorded is None:
                return self.step(*inputs)
        else:  # the capture counted the first replay's work; a replay runs no hooks
            work.add(self._work[key])
        graph, buffers, output = recorded
        for buffer, value in zip(buffers, inputs, strict=True):
            buffer.copy_(value, non_blocking=True)
        graph.replay()
        return output

    def _on_side_stream(self, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=inputs[0].device)
        main = torch.cuda.current_stream(inputs[0].device)
        self._stream.wait_stream(main)
        with torch.cuda.stream(self._stream):
            output = self.step(*inputs)
        main.wait_stream(self._stream)
        return output

    def _record(self, key: tuple, inputs: tuple[torch.Tensor, ...]):
        buffers = [t.clone() for t in inputs]
        graph = torch.cuda.CUDAGraph()
        main = torch.cuda.current_stream(inputs[0].device)
        try:
            with work.counting() as tally, torch.cuda.graph(graph,
                                                            capture_error_mode="thread_local"):
                output = self.step(*buffers)
        except RuntimeError as err:  # a step that breaks a rule: run it eagerly
            work.add(-tally.macs)  # the eager call that follows does this step's work
            _abandon(graph, main)
            self._failed = True
            COUNTS.failed += 1
            cause = err.__context__ or err  # ending the capture fails after the cause
            first_line = (str(cause).splitlines() or [""])[0]
            warnings.warn(f"a training step could not be recorded as a CUDA graph, so it "
                          f"and every later step run eagerly (slower, same results): "
                          f"{first_line}", RuntimeWarning, stacklevel=3)
            return None
        self.captures += 1
        COUNTS.recorded += 1
        self._work[key] = tally.macs  # open tallies counted it once already, as one step
        self._graphs[key] = (graph, buffers, output)
        return self._graphs[key]


def _abandon(graph: torch.cuda.CUDAGraph, main: torch.cuda.Stream) -> None:
    """After a failed capture: torch.cuda.graph leaves its capture stream current and the
    allocator sending that stream's allocations to the graph's pool when ending the
    capture raises. Put both back as far as torch allows (the pool calls are private
    bindings, hence best effort), and record no graph in this process again."""
    torch.cuda.set_stream(main)
    _enabled[0] = False
    try:
        pool, device = graph.pool(), torch.cuda.current_device()
        torch._C._cuda_endAllocateToPool(device, pool)
        torch._C._cuda_releasePool(device, pool)
    except (AttributeError, RuntimeError):
        pass
