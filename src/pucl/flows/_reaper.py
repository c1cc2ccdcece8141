"""Stop a command's temporary Prefect server when the command is gone.

The server is a separate process (uvicorn). A command that ends normally, by Ctrl-C or by
a SIGTERM it can unwind from stops it on the way out; one that is killed (SIGKILL, the
out-of-memory killer, a second SIGTERM) leaves it running, holding its port and database
for ever. This watcher closes that gap without polling: it holds the read end of a pipe
whose only writer is the command, so its read returns the moment the command ends.

    python -m pucl.flows._reaper SERVER_PID   (stdin: a pipe from the command)
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

GRACE_SECONDS = 10.0  # the server's time to shut down before it is killed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or the pid is someone else's now
        return False
    return True


def stop(pid: int, grace: float = GRACE_SECONDS) -> None:
    """SIGTERM `pid`, then SIGKILL it if it still runs after `grace` seconds."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    server = int(argv[0])
    # Ctrl-C reaches the whole terminal group: the command unwinds and stops the server
    # itself, so the watcher must outlive the keystroke and only act on the pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):  # nothing is ever written: returns b"" at the end
        pass
    stop(server)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
