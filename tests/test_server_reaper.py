"""A command's temporary Prefect server ends with the command, even a killed one."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Enters prefect_api() the way every pucl command does, says it is ready, then waits.
COMMAND = """
import time
from pucl.flows._server import prefect_api
with prefect_api():
    print("ready", flush=True)
    time.sleep(120)
"""


def processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every live process, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # ended while we looked
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":  # a zombie has ended; only its parent has not collected it yet
            found.append((int(entry.name), int(ppid), cmdline))
    return found


def children(pid: int, marker: str) -> list[int]:
    return [p for p, ppid, cmd in processes() if ppid == pid and marker in cmd]


def gone(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not set(pids) & {p for p, _, _ in processes()}:
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def command(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    proc = subprocess.Popen([sys.executable, "-c", COMMAND], stdout=subprocess.PIPE,
                            env=env, text=True)
    assert proc.stdout.readline().strip() == "ready", "the command did not start its server"
    spawned = children(proc.pid, "uvicorn") + children(proc.pid, "pucl.flows._reaper")
    yield proc
    proc.kill()
    proc.wait()
    for pid in spawned:  # never leave a server behind, whatever the test found
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_killed_command_leaves_no_server_running(command):
    server = children(command.pid, "uvicorn")
    watcher = children(command.pid, "pucl.flows._reaper")
    assert len(server) == 1 and len(watcher) == 1, (server, watcher)
    command.kill()  # SIGKILL: no clean-up of its own can run
    command.wait()
    assert gone(server, 20), f"the temporary server (pid {server[0]}) outlived its command"
    assert gone(watcher, 10), "the watcher outlived the server"
