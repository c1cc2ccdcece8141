"""Writing and reading pipeline files safely: every output is written to a temporary file
beside its target and renamed over it only when complete, so a crash or a bad input never
leaves a half-written or corrupted file behind."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pucl.errors import DataError


def read_table(path: Path, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """A stage's table input, with the columns the reader relies on."""
    try:
        frame = pd.read_parquet(path)
    except FileNotFoundError:
        raise DataError(f"missing input {path}: run the stage that writes it first "
                        "(pucl repro)") from None
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise DataError(f"cannot read {path}: {type(exc).__name__}: {first}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DataError(f"{path} lacks the columns {missing} (has {list(frame.columns)}): "
                        "rerun the stage that writes it")
    return frame


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it over `path` only on success, so a
    crash never leaves a half-written output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_torch(path: Path, obj: Any) -> None:
    """torch.save `obj` to `path` atomically. Saved through a file object, the archive
    inside is not named after the temporary file: equal content gives equal bytes, so
    DVC sees an unchanged output as unchanged."""
    import torch

    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        torch.save(obj, f)


def read_torch(path: Path, what: str, rebuild: str) -> Any:
    """A file written by `write_torch`, read with torch's weights-only unpickler: tensors,
    numbers, strings and their containers only, so no file can run code when pucl loads
    it. A file holding anything else (a crafted pickle, another program's file) gets a
    one-line DataError that names it and says how to `rebuild` it; a missing file raises
    FileNotFoundError, other read failures (a truncated archive) raise as torch raised
    them."""
    import pickle
    import warnings
    import zipfile

    import torch

    if Path(path).is_file() and not zipfile.is_zipfile(path):
        raise DataError(f"cannot read {what} {path}: it is not a file torch.save wrote (not "
                        f"a zip archive); {rebuild}")
    try:
        with warnings.catch_warnings():  # its note on a foreign file's protocol: said below
            warnings.filterwarnings("ignore", "Detected pickle protocol", UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise DataError(f"refused {what} {path}: it holds more than tensors and plain "
                        f"values ({_refusal(exc)}), and loading it could run code from it; "
                        f"{rebuild}") from None


def _refusal(exc: Exception) -> str:
    """The reason inside torch's weights-only message, without its advice to load the
    file unsafely: the first sentence that is not that advice."""
    text = str(exc).split("WeightsUnpickler error:")[-1]
    for paragraph in text.split("\n\n"):
        reason = paragraph.strip().split(". ")[0].strip().rstrip(".")
        if reason and not reason.startswith(("Weights only load failed", "Check the doc")):
            return reason.splitlines()[0]
    return type(exc).__name__


def jsonable(value: Any) -> Any:
    """`value` in JSON's types: numpy numbers as Python's, tuples as lists, NaN as None."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def write_json(path: Path, data: dict) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(jsonable(data), indent=2, sort_keys=True) + "\n")


def write_table(path: Path, frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        if path.suffix == ".csv":
            frame.to_csv(tmp, index=False)
        else:
            frame.to_parquet(tmp, index=False)


def save_figure(path: Path, fig) -> None:
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip("."), dpi=110, bbox_inches="tight")
    plt.close(fig)


def read_json(path: Path) -> dict:
    """A stage's JSON input, or a one-line error naming the file."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"missing input {path}: run the stage that writes it first "
                        "(pucl repro)") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"input {path} is not valid JSON: {exc}") from None
