"""The commit a measurement ran at, for the `commit` column of the reports' CSVs: HEAD's
12-character hash, with `-dirty` when tracked files differ from it (the row is then not
reproducible from the commit alone, and says so)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# read_csv's dtype for a CSV with this column: a hash of digits and one "e" ("3289e3843056")
# or of digits alone would otherwise be read as a number, and written back changed
TEXT_COLUMNS = {"commit": str}


def current_commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if dirty else head


def with_commit(frame, commit: str | None = None):
    """`frame` with a last column `commit` (rows that have one keep it)."""
    commit = commit or current_commit()
    out = frame.copy()
    kept = out.pop("commit") if "commit" in out else None
    out["commit"] = commit if kept is None else kept.fillna(commit)
    return out
