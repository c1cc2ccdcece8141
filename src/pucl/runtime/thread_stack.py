"""Items that hold while a block runs in one thread (progress listeners, work tallies):
each thread sees only its own, so two stages run in threads of one process stay apart."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class ThreadStack(Generic[T]):
    def __init__(self) -> None:
        self._local = threading.local()

    def items(self) -> list[T]:
        """This thread's items, oldest first."""
        if not hasattr(self._local, "items"):
            self._local.items = []
        return self._local.items

    @contextmanager
    def pushed(self, item: T) -> Iterator[T]:
        """`item` among this thread's items while the block runs."""
        self.items().append(item)
        try:
            yield item
        finally:
            self.items().remove(item)
