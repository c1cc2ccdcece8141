"""The work a run does, counted instead of timed: multiply-accumulates (MACs) of every
convolution and linear layer a network runs, and of the neighbour searches, in GMACs.

A minute measured while other jobs share the cores says as much about them as about the
run (two runs of one variant on this 2-core machine differed by a quarter), and even a
process's CPU seconds move by a sixth with the load. The work of the same params is the
same number on a busy machine and an idle one, so it is what breaks a tie between two
variants (pucl.reporting.paired_choice). It leaves out what no layer does (augmentation,
optimiser steps, scikit-learn), which is small beside the networks here.

A training pass counts 3 times its forward MACs (the backward pass costs about two
forwards); a pass without gradients counts once. Counting is on only inside `counting()`,
where one global forward hook does it; a step replayed as a CUDA graph runs no Python, so
pucl.runtime.step_graph adds the work its capture counted at every replay.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from pucl.runtime.thread_stack import ThreadStack

TRAINING_FACTOR = 3  # forward + backward through activations and weights


class Tally:
    """The work done while it is open, in multiply-accumulates."""

    def __init__(self) -> None:
        self.macs = 0.0

    @property
    def gmac(self) -> float:
        return self.macs / 1e9


# tallies are per thread (two stages run in threads of one process count apart); the one
# global hook is installed while any thread has a tally open
_tallies: ThreadStack[Tally] = ThreadStack()
_lock = threading.Lock()
_hook: torch.utils.hooks.RemovableHandle | None = None
_users = 0


def add(macs: float) -> None:
    """Count work done outside a layer (a matrix product, a search) in every tally open
    in this thread."""
    for tally in _tallies.items():
        tally.macs += macs


def is_counting() -> bool:
    """Whether a tally is open in this thread: work done elsewhere for it (a worker
    process, pucl.runtime.parallel) is worth counting and `add`ing here."""
    return bool(_tallies.items())


def layer_macs(module: nn.Module, output: torch.Tensor) -> float:
    """One forward call's MACs of a convolution or linear layer (0 for other modules)."""
    if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        per_output = module.in_channels // module.groups * math.prod(module.kernel_size)
    elif isinstance(module, nn.Linear):
        per_output = module.in_features
    else:
        return 0.0
    macs = float(output.numel() * per_output)
    if torch.is_grad_enabled() and module.weight.requires_grad:
        macs *= TRAINING_FACTOR
    return macs


def _on_forward(module: nn.Module, inputs, output) -> None:
    # a trace (torch.export of a logged model, torch.compile) runs no work, and reading
    # its symbolic batch size here would pin the exported program to that size
    if torch.compiler.is_compiling() or not isinstance(output, torch.Tensor):
        return
    macs = layer_macs(module, output)
    if macs:
        add(macs)


@contextmanager
def counting() -> Iterator[Tally]:
    """A tally of the work done in this thread inside the block (nested tallies each
    count it)."""
    global _hook, _users
    tally = Tally()
    with _lock:
        if _hook is None:
            _hook = nn.modules.module.register_module_forward_hook(_on_forward)
        _users += 1
    try:
        with _tallies.pushed(tally):
            yield tally
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _hook is not None:
                _hook.remove()
                _hook = None
