"""Ending on SIGTERM the way Ctrl-C ends: by unwinding.

Python's default for SIGTERM (what `kill`, a scheduler's timeout, `systemctl stop` and
Prefect's cancellation send) ends the process on the spot: open MLflow runs stay RUNNING
for ever and `finally` clean-ups never run. `end_on_sigterm()` turns the signal into the
`Terminated` exception instead, so every `with` block closes on the way out and runs are
recorded as KILLED, like a Ctrl-C (`run_status`).
"""

from __future__ import annotations

import signal
import threading

SIGTERM_EXIT_CODE = 128 + signal.SIGTERM  # what a shell reports for a process it killed


class Terminated(SystemExit):
    """SIGTERM arrived. A SystemExit, so that the process exits with 143 once unwound
    and no `except Exception` on the way swallows it."""


def _raise_terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
    raise Terminated(SIGTERM_EXIT_CODE)


def end_on_sigterm() -> bool:
    """Make SIGTERM raise `Terminated` in this process's main thread. Leaves a handler
    someone else installed alone (Prefect's runner has its own); returns whether ours is
    installed. Python only lets the main thread install handlers: a no-op elsewhere."""
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGTERM)
    if current is _raise_terminated:
        return True
    if current not in (signal.SIG_DFL, None):
        return False
    signal.signal(signal.SIGTERM, _raise_terminated)
    return True


def run_status(exc: BaseException | None) -> str:
    """The MLflow status of a run its body left with `exc`: FINISHED without one, KILLED
    when someone stopped it (Ctrl-C, SIGTERM), FAILED otherwise."""
    if exc is None:
        return "FINISHED"
    if isinstance(exc, KeyboardInterrupt | Terminated):
        return "KILLED"
    return "FAILED"
