"""Progress of long work, for whoever watches it: the person at the terminal (a tqdm bar)
and any listener a caller registers (a sweep point's progress file, a benchmark's clock).

Core code reports what it does with `report(...)` or iterates `EpochBar`; a listener
registered with `listening(callback)` receives each event as a dict: `stage` (when a
pipeline stage starts), or `step` (a loop's name, e.g. "pretrain"), `done` and `total`
(epochs or folds finished, out of how many). No listener: nothing but the bar happens.
Listeners are per thread, so sweep points that share a process on threads each hear
only their own work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from tqdm.auto import tqdm

from pucl.runtime.thread_stack import ThreadStack

Listener = Callable[[dict[str, Any]], None]
_listeners: ThreadStack[Listener] = ThreadStack()


def report(**event: Any) -> None:
    for listener in list(_listeners.items()):
        listener(event)


def listening(listener: Listener) -> AbstractContextManager[Listener]:
    """Send every event reported in this thread to `listener` while the block runs."""
    return _listeners.pushed(listener)


class EpochBar:
    """range(initial, total) with a tqdm bar that also reports each finished epoch (after
    the loop body for it has run) as {step: desc, done, total}."""

    def __init__(self, total: int, desc: str, disable: bool = False, initial: int = 0,
                 unit: str = "epoch"):
        self.desc, self.total = desc, total
        self.bar = tqdm(range(initial, total), desc=desc, unit=unit, disable=disable,
                        initial=initial, total=total)

    def __iter__(self) -> Iterator[int]:
        for i in self.bar:
            yield i
            report(step=self.desc, done=i + 1, total=self.total)

    def set_postfix(self, fields: dict[str, Any]) -> None:
        self.bar.set_postfix(fields)
