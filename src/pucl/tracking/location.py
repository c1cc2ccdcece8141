"""Where tracking happens: the project root (also for DVC's experiment copies), the MLflow
store URI, and the tags that pin a run to a code and data version."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

ROOT_ENV = "PUCL_ROOT"
_DVC_EXP_MARKER = (".dvc", "tmp", "exps")


def project_root(start: Path | None = None) -> Path:
    """The directory holding dvc.yaml; for a DVC temporary experiment copy, the original
    workspace that owns it. PUCL_ROOT overrides."""
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]).resolve()
    here = (start or Path.cwd()).resolve()
    parts = here.parts
    for i in range(len(parts) - 2):
        if parts[i:i + 3] == _DVC_EXP_MARKER:
            return Path(*parts[:i])
    for candidate in (here, *here.parents):
        if (candidate / "dvc.yaml").exists():
            return candidate
    return here


def resolve_tracking_uri(configured: str | None, root: Path) -> str:
    """MLFLOW_TRACKING_URI, else params `tracking.uri`, else sqlite:///<root>/mlflow.db.
    Relative sqlite and file paths are made absolute against the project root."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or configured
    if not uri:
        return f"sqlite:///{root / 'mlflow.db'}"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return f"sqlite:///{(root / uri[len('sqlite:///'):]).resolve()}"
    if "://" not in uri:
        return (root / uri).resolve().as_uri()
    return uri


def git_commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else "none"


def standard_tags(root: Path) -> dict[str, str]:
    return {"git_commit": git_commit(root), "dvc_lock": file_digest(root / "dvc.lock")}
