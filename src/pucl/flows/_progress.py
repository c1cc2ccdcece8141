"""Where a sweep's points are while it runs.

Each point's worker keeps `progress.json` in the point's run directory: the stage it is
in and its current loop's epochs (fed by pucl.runtime.progress events, written at most every few
seconds, and at once when the stage changes). The sweep's flow reads those files while it
waits for its points and logs one line whenever the picture changes: how many points are
done, running and queued, and where each running point is. A worker on a machine that
does not share the project's file system still counts as running; its detail is missing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pucl.io import write_json

PROGRESS_FILE = "progress.json"


class PointProgress:
    """A pucl.runtime.progress listener that keeps a point's progress file up to date."""

    def __init__(self, path: Path, min_interval: float = 2.0):
        self.path, self.min_interval = path, min_interval
        self.state: dict[str, Any] = {}
        self.written = 0.0

    def __call__(self, event: dict[str, Any]) -> None:
        new_stage = "stage" in event and event["stage"] != self.state.get("stage")
        if new_stage:
            self.state = {"stage": event["stage"]}
        else:
            self.state.update({k: event[k] for k in ("step", "done", "total") if k in event})
        now = time.monotonic()
        if new_stage or now - self.written >= self.min_interval:
            write_json(self.path, self.state)
            self.written = now

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def describe(state: dict[str, Any] | None) -> str:
    """'pretrain: pretrain 12/50' from a progress file's contents ('' when unknown)."""
    if not state or "stage" not in state:
        return ""
    loop = f" {state['step']} {state['done']}/{state['total']}" if "step" in state else ""
    return f"{state['stage']}{':' if loop else ''}{loop}"


def read_progress(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # not written yet, or being replaced
        return None


class SweepWatch:
    """Logs a sweep's points as done / running / queued, with each running point's stage
    and epoch: a line when the counts change, and otherwise at most one every
    `min_interval` seconds when a running point moved."""

    def __init__(self, names: Sequence[str], directories: Sequence[Path],
                 log: Callable[[str], None], min_interval: float = 15.0):
        self.names, self.directories, self.log = names, directories, log
        self.min_interval = min_interval
        self.last_counts: tuple[int, int, int] | None = None
        self.last_line, self.logged = "", 0.0

    def line(self, futures: Sequence[Any]) -> tuple[tuple[int, int, int], str]:
        done, running = 0, []
        for name, directory, future in zip(self.names, self.directories, futures, strict=True):
            if future is None:
                continue  # waits for the point that trains its encoder
            state = future.state
            if state.is_final():
                done += 1
            elif state.is_running():
                where = describe(read_progress(directory / PROGRESS_FILE))
                running.append(f"{name} ({where})" if where else name)
        counts = (done, len(running), len(self.names) - done - len(running))
        text = (f"{counts[0]}/{len(self.names)} points done, {counts[1]} running, "
                f"{counts[2]} queued")
        return counts, text + (": " + "; ".join(running) if running else "")

    def poll(self, futures: Sequence[Any]) -> None:
        counts, text = self.line(futures)
        now = time.monotonic()
        if text == self.last_line:
            return
        if counts != self.last_counts or now - self.logged >= self.min_interval:
            self.log(text)
            self.last_counts, self.last_line, self.logged = counts, text, now
