"""A command's temporary Prefect server ends with the command, even a killed one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

# Enters prefect_api() the way every pucl command does, reports the server's pid, waits.
COMMAND = """
import os, sys, time
from pucl.flows._server import prefect_api
from prefect.server.api.server import SubprocessASGIServer
with prefect_api():
    server = next(iter(SubprocessASGIServer._instances.values()))
    print(server.server_process.pid, flush=True)
    time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); its state in /proc says it has ended
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def command(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    proc = subprocess.Popen([sys.executable, "-c", COMMAND], stdout=subprocess.PIPE,
                            env=env, text=True)
    line = proc.stdout.readline()
    assert line.strip().isdigit(), f"the command did not start its server: {line!r}"
    server = int(line)
    yield proc, server
    proc.kill()
    proc.wait()
    if alive(server):  # never leave a server behind, whatever the test found
        os.kill(server, signal.SIGKILL)


def watchers(server: int) -> list[str]:
    return subprocess.run(["pgrep", "-f", f"pucl.flows._reaper {server}$"],
                          capture_output=True, text=True).stdout.split()


def test_a_killed_command_leaves_no_server_running(command):
    proc, server = command
    assert alive(server)
    assert len(watchers(server)) == 1
    proc.kill()  # SIGKILL: no clean-up of its own can run
    proc.wait()
    assert wait_gone(server, 20), f"the temporary server (pid {server}) outlived its command"
    deadline = time.monotonic() + 10
    while watchers(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert watchers(server) == [], "the watcher outlived its server"
