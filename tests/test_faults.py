"""Faults of the machine and of concurrent use. A disk that fills up during a stage's write
or during `pucl data add`: one line, exit 2, and what was there before is intact (no
half-written file, no lost or half-recorded batch); the full disk is real, a small tmpfs
mounted over the directory written to (root only). Two runs of one name at once: the
second is refused."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from pucl.errors import DiskFull, disk_full
from tests.conftest import copy_project, make_project, python_path, tiny_params
from tests.helpers import stage


def _can_mount() -> bool:
    with tempfile.TemporaryDirectory() as where:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", where],
                              capture_output=True)
        if done.returncode == 0:
            subprocess.run(["umount", where], check=True)
        return done.returncode == 0


needs_mount = pytest.mark.skipif(not _can_mount(), reason="mounting a tmpfs needs root")


@contextmanager
def nearly_full(path: Path, free: int):
    """A tmpfs mounted over `path`, holding what `path` held, with about `free` bytes left
    (a ballast file takes the rest); the original directory is back after the block."""
    saved = Path(tempfile.mkdtemp()) / "saved"
    shutil.copytree(path, saved, symlinks=True)
    used = sum(p.stat().st_size for p in saved.rglob("*") if p.is_file())
    size = used + free + 4 * 1024 * 1024  # room for file-system overhead per file
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True)
    try:
        shutil.copytree(saved, path, symlinks=True, dirs_exist_ok=True)
        stats = os.statvfs(path)
        ballast = path / ".ballast"
        with open(ballast, "wb") as fh:
            os.posix_fallocate(fh.fileno(), 0, stats.f_bavail * stats.f_frsize - free)
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)
        shutil.rmtree(saved.parent, ignore_errors=True)


def test_a_full_disk_is_found_under_the_errors_libraries_wrap_it_in():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/data/head.pt")
        except OSError as exc:  # as torch.save reports it
            raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos") from exc
    except RuntimeError as wrapped:
        found = disk_full(wrapped)
    assert isinstance(found, DiskFull) and found.exit_code == 2
    assert "no space left on the device writing /data/head.pt" in str(found)
    assert disk_full(RuntimeError("something else")) is None
    assert disk_full(OSError(errno.EACCES, "Permission denied")) is None


@needs_mount
def test_a_stage_on_a_full_disk_stops_in_one_line_and_keeps_its_outputs(finished_tiny,
                                                                          tmp_path,
                                                                          monkeypatch):
    project = copy_project(finished_tiny, tmp_path / "proj")
    monkeypatch.setenv("PUCL_ROOT", str(project))
    monkeypatch.setenv("PUCL_TRACKING", "off")
    outs = project / "data/classifier"
    with nearly_full(outs, free=0):
        before = {p.name: p.read_bytes() for p in outs.iterdir() if p.name != ".ballast"}
        result = stage(project, "train_classifier", check=False)
        after = {p.name: p.read_bytes() for p in outs.iterdir() if p.name != ".ballast"}
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("pucl train_classifier: error: no space left on the device")
    assert after == before and "head.pt" in before  # whole files, none half-written


@pytest.fixture
def tracked(tmp_path, monkeypatch) -> Path:
    """A project on a tracked dataset of 1,500 rows (`pucl data init`), and `batch.npz`:
    600 more rows to add."""
    from typer.testing import CliRunner

    from pucl.cli import app

    params = tiny_params(data={"dataset": "tracked", "task": "given"})
    project = make_project(tmp_path / "proj", params)
    monkeypatch.setenv("PUCL_ROOT", str(project))
    monkeypatch.setenv("PUCL_TRACKING", "off")
    monkeypatch.setenv("PATH", python_path())
    monkeypatch.chdir(project)
    result = CliRunner().invoke(app, ["data", "init", "--rows", "1500", "--rest", "rest.npz"])
    assert result.exit_code == 0, result.output
    rest = np.load(project / "rest.npz")
    np.savez(project / "batch.npz", **{k: rest[k][:600] for k in rest.files})
    return project


def add(project: Path, in_process: bool = False):
    """`pucl data add batch.npz`: a process of its own (a full disk is the command's own
    end), or typer's runner in this process (the same app, exit code and output, without
    a Python start)."""
    if not in_process:
        return subprocess.run([sys.executable, "-m", "pucl.cli", "data", "add", "batch.npz"],
                              cwd=project, capture_output=True, text=True)
    from typer.testing import CliRunner

    from pucl.cli import app

    result = CliRunner().invoke(app, ["data", "add", "batch.npz"])
    return subprocess.CompletedProcess("pucl data add", result.exit_code, result.stdout,
                                       result.stderr)


def batches(project: Path) -> list[str]:
    return sorted(p.name for p in (project / "data/dataset/batches").iterdir())


@needs_mount
def test_data_add_on_a_full_disk_records_nothing_and_the_next_add_works(tracked):
    record = (tracked / "data/dataset/batches.dvc").read_bytes()
    with nearly_full(tracked / ".dvc/cache", free=64 * 1024):
        full = add(tracked)
    assert full.returncode == 2, full.stderr
    lines = full.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pucl: error: no space left on the device")
    assert batches(tracked) == ["00000.npz"]
    assert (tracked / "data/dataset/batches.dvc").read_bytes() == record
    again = add(tracked, in_process=True)
    assert again.returncode == 0 and "batch 00001" in again.stdout, again.stderr


def test_a_batch_an_interrupted_add_left_unrecorded_is_removed_not_kept(tracked):
    """A kill between writing the batch and `dvc add` leaves a file DVC never recorded:
    the next add (or retrain) removes it and says so, so the batch is added once."""
    from pucl.production.datastore import current_version

    first = tracked / "data/dataset/batches/00000.npz"
    shutil.copyfile(first, first.with_name("00001.npz"))  # what the killed add wrote
    first.with_name(".00002.npz.k3j1x9.tmp").write_bytes(b"half a batch")  # killed mid-write
    done = add(tracked, in_process=True)
    assert done.returncode == 0, done.stderr
    assert "removed" in done.stderr and "00001.npz: an interrupted `pucl data add`" in done.stderr
    assert "batch 00001" in done.stdout and batches(tracked) == ["00000.npz", "00001.npz"]
    # (batches() lists hidden files too: the temporary file is gone)
    added = np.load(tracked / "data/dataset/batches/00001.npz")
    assert len(added["pu"]) == 600  # the new batch, not the leftover copy
    assert current_version(tracked / "data/dataset").rows == 2100
    status = subprocess.run([sys.executable, "-m", "dvc", "status", "data/dataset/batches.dvc"],
                            cwd=tracked, capture_output=True, text=True).stdout
    assert "up to date" in status


def test_a_second_run_of_the_same_name_is_refused_while_the_first_runs(project):
    """Two runs writing one directory would mix their outputs: while a run holds its
    directory, another of that name stops at once and touches nothing."""
    from pucl.production.datastore import LockedError, exclusive
    from pucl.stages.runner import resolve_params, run_directory, run_pipeline

    params = resolve_params(project)
    workdir = run_directory(project, params, "mine")
    refused = pytest.raises(LockedError, match=r"another run named 'mine' is running \(lock "
                                               r".*\.mine\.lock\); try again when")
    with exclusive(workdir.with_name(".mine.lock"), "the first run"), refused:  # as a run does
        run_pipeline(params, workdir, "mine")
    assert not workdir.exists()


def test_runs_a_killed_process_left_running_are_closed_by_the_next_command(tracking_uri,
                                                                            tmp_path):
    """Each run records which process holds it (host, pid, start time). Runs of a process of
    this machine that is gone are marked KILLED (tag orphan) when the next top-level run
    opens; a live process's run, another machine's and an unowned one stay RUNNING."""
    from pucl.tracking.store import OWNER_TAG, open_store, process_id, run_in

    store = open_store(tracking_uri, "pucl", tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE)
    dead = process_id(gone.pid)  # taken while it runs: its pid and start time
    gone.communicate(b"\n")  # and now it is gone
    runs = {who: store.start_run(who, tags, None).run_id for who, tags in [
        ("dead", {OWNER_TAG: dead}), ("alive", {}),
        ("elsewhere", {OWNER_TAG: "another-machine:1:0.000"}), ("unowned", {OWNER_TAG: ""})]}
    with run_in(store, "next command", tmp_path):
        pass
    status = {who: store.client.get_run(run_id) for who, run_id in runs.items()}
    assert status["dead"].info.status == "KILLED"
    assert status["dead"].data.tags["orphan"] == "true"
    assert {who: run.info.status for who, run in status.items() if who != "dead"} == \
        {"alive": "RUNNING", "elsewhere": "RUNNING", "unowned": "RUNNING"}
    assert status["alive"].data.tags[OWNER_TAG] == process_id()
