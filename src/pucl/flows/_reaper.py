"""Stop what a command started (a temporary Prefect server, the MLflow UI, dvc) when the
command is gone.

The server is a separate process, or a process group. A command that ends normally, by
Ctrl-C or by a SIGTERM it can unwind from stops it on the way out; one that is killed
(SIGKILL, the out-of-memory killer, a second SIGTERM) leaves it running, holding its port
and database for ever. This watcher closes that gap without polling: it holds the read
end of a pipe whose only writer is the command, so its read returns the moment the
command ends.

    python -m pucl.flows._reaper [--group] PID   (stdin: a pipe from the command)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

GRACE_SECONDS = 10.0  # the server's time to shut down before it is killed


def _alive(pid: int, group: bool = False) -> bool:
    with contextlib.suppress(ChildProcessError):  # our own child ended: collect it, or
        os.waitpid(pid, os.WNOHANG)  # the zombie it leaves would count as alive
    try:
        (os.killpg if group else os.kill)(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or the pid is someone else's now
        return False
    return True


def stop(pid: int, grace: float = GRACE_SECONDS, group: bool = False) -> None:
    """SIGTERM `pid` (with `group`, every process of the group `pid` leads), then SIGKILL
    what still runs after `grace` seconds."""
    send = os.killpg if group else os.kill
    try:
        send(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _alive(pid, group):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        send(pid, signal.SIGKILL)


def watch(pid: int, group: bool = False) -> subprocess.Popen:
    """Start the watcher that stops `pid` (or its process group) if this process ends
    before its own clean-up runs. Its stdin is a pipe only this process writes to, so the
    pipe closes exactly when this process ends. It runs in a session of its own: a kill of
    this process's whole group (a service manager's, a job runner's) must not take the
    watcher with it. `kill()` it after a normal clean-up."""
    return subprocess.Popen([sys.executable, "-m", "pucl.flows._reaper",
                             *(["--group"] if group else []), str(pid)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, close_fds=True,
                            start_new_session=True)


def main(argv: list[str]) -> int:
    group = argv[:1] == ["--group"]
    pid = int(argv[-1])
    # Ctrl-C reaches the whole terminal group: the command unwinds and stops the server
    # itself, so the watcher must outlive the keystroke and only act on the pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):  # nothing is ever written: returns b"" at the end
        pass
    stop(pid, group=group)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
