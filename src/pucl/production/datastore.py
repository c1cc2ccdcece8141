"""The tracked dataset on disk and under DVC: create it, append a batch, name its version.

`pucl data init` and `pucl data add` call these; the format itself (and the loader the
stages use) is `pucl.data.tracked`. Every change is all or nothing: a batch is checked
whole (array checks, then the `batch` data contract) before a byte is written, written
under a temporary name, and removed again when DVC cannot record it. One lock per
dataset directory serialises writers.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from pucl.data import get_task, load_dataset
from pucl.data.own import image_files, read_images, read_npz
from pucl.data.split import (
    check_validation_counts,
    given_pu_split,
    make_pu_split,
    resolve_val_fraction,
    smallest_validation_fraction,
    unlabeled_rows,
    validation_rows,
    why_no_validation_part,
)
from pucl.data.tracked import (
    BATCHES,
    HOLDOUT,
    PU_OPTIONAL,
    Batch,
    Holdout,
    batch_files,
    check_batch,
    is_initialised,
    read_batch,
    read_holdout,
)
from pucl.errors import DataError, PuclError, disk_full
from pucl.io import atomic_path
from pucl.params.config import Params, load_yaml
from pucl.recipe import Recipe
from pucl.recipe.crossfit import validation_plan

LOCK_TIMEOUT_S = 5.0


class LockedError(PuclError):
    """Someone else is changing the same thing (another retrain, another data add)."""


@contextmanager
def exclusive(lock_file: Path, what: str, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold an inter-process lock, or refuse with one line after `timeout` seconds. The OS
    releases it when the holder dies, so a killed run never leaves it stuck."""
    from filelock import FileLock, Timeout

    lock_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(lock_file, timeout=timeout):
            yield
    except Timeout:
        waited = f", waited {timeout:g} s" if timeout else ""
        raise LockedError(f"another {what} is running (lock {lock_file}{waited}); try "
                          "again when it has finished") from None


@dataclass(frozen=True)
class DataVersion:
    """What the tracked dataset holds now."""

    digest: str  # sha256 of the files' names and contents (what retrain compares)
    dvc_md5: str | None  # DVC's hash of the directory (data/<name>.dvc), when recorded
    batches: int
    rows: int

    def as_tags(self) -> dict[str, str]:
        return {"data.version": self.digest[:16], "data.dvc_md5": self.dvc_md5 or "none",
                "data.batches": str(self.batches), "data.rows": str(self.rows)}


def content_digest(directory: Path) -> str:
    """sha256 over the relative names and contents of the data files (the holdout and the
    batches; not the README or DVC's bookkeeping), in name order."""
    h = hashlib.sha256()
    files = [directory / HOLDOUT, *batch_files(directory)] if is_initialised(directory) else []
    for file in files:
        h.update(str(file.relative_to(directory)).encode())
        with open(file, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def dvc_md5(directory: Path) -> str | None:
    """The hash DVC recorded for the batches (`batches.dvc`), if any."""
    meta = directory / f"{BATCHES}.dvc"
    if not meta.exists():
        return None
    outs = (load_yaml(meta.read_text()) or {}).get("outs") or [{}]
    return outs[0].get("md5")


def current_version(directory: Path) -> DataVersion:
    files = batch_files(directory)
    rows = 0
    for file in files:
        with np.load(file, allow_pickle=False) as archive:
            rows += len(archive["pu"])
    return DataVersion(content_digest(directory), dvc_md5(directory), len(files), rows)


def holdout_digest(*arrays: np.ndarray) -> str:
    """sha256 of the holdout's arrays (dtype, shape and bytes), recorded on every retrain."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


# -- reading a batch a user gives -------------------------------------------------------

def read_source_batch(path: Path, like: np.ndarray) -> Batch:
    """A batch file (npz: x, pu[, y]) or folder (positive/, unlabeled/), checked."""
    if not path.exists():
        raise DataError(f"batch {path} does not exist")
    if path.is_dir():
        parts = {"positive": image_files(path / "positive"),
                 "unlabeled": image_files(path / "unlabeled")}
        if not parts["positive"] and not parts["unlabeled"]:
            raise DataError(f"batch folder {path} holds no image in positive/ or unlabeled/")
        x = read_images(parts["positive"] + parts["unlabeled"])
        pu = np.r_[np.ones(len(parts["positive"]), np.int64),
                   np.zeros(len(parts["unlabeled"]), np.int64)]
        return check_batch({"x": x, "pu": pu}, str(path), like)
    return read_batch(path, like)


# -- creating and growing the dataset ---------------------------------------------------

class _Failures(logging.Handler):
    """The errors DVC logs instead of raising (a cache transfer that failed)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])


def _not_in_cache(repo, records: list[Path]) -> list[str]:
    """The outputs of these .dvc files whose content is not (all) in DVC's cache."""
    status = repo.status(targets=[str(r) for r in records])  # absolute: any cwd
    return sorted(path for changes in status.values() for change in changes
                  if isinstance(change, dict)
                  for path, state in (change.get("changed outs") or {}).items()
                  if state == "not in cache")


def _dvc_add(root: Path, targets: list[Path]) -> None:
    """Record the files as a new DVC version (`dvc add`; their .dvc files sit beside them).
    All or nothing: when DVC fails, or records a version whose content it could not copy
    into its cache (it logs a failed transfer, on a full disk say, and carries on), the
    .dvc files are put back as they were and the error raised (DiskFull for a full disk)."""
    if not (root / ".dvc").is_dir():
        raise DataError(f"{root} is not a DVC repository (run: dvc init): the tracked dataset "
                        "is versioned by DVC")
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    records = [t.with_name(f"{t.name}.dvc") for t in targets]
    before = {r: r.read_bytes() if r.exists() else None for r in records}
    failures = _Failures()
    try:
        with _dvc_logs(failures), Repo(str(root)) as repo:
            repo.add([str(t) for t in targets])
            missing = _not_in_cache(repo, records)
        if missing:
            full = next(filter(None, map(disk_full, failures.errors)), None)
            raise full or DataError(f"dvc add could not copy {', '.join(missing)} into its "
                                    "cache (see DVC's error above); nothing was recorded")
    except DvcException as exc:
        _restore(before)
        raise disk_full(exc) or DataError(f"dvc add {' '.join(map(str, targets))} failed: "
                                          f"{str(exc).splitlines()[0]}") from None
    except BaseException:
        _restore(before)
        raise


@contextmanager
def _dvc_logs(failures: _Failures) -> Iterator[None]:
    """DVC's warnings and errors as usual, without its hints (git add ...: pucl prints its
    own summary); the errors of its transfer libraries go to `failures` only, since pucl
    reports a failed copy itself, in one line."""
    dvc_log = logging.getLogger("dvc")
    level = dvc_log.level
    dvc_log.setLevel(logging.WARNING)
    dvc_log.addHandler(failures)
    quiet = [logging.getLogger(name) for name in ("dvc_data", "dvc_objects")]
    saved = [(log.handlers[:], log.propagate) for log in quiet]
    for log in quiet:
        log.handlers, log.propagate = [failures], False
    try:
        yield
    finally:
        dvc_log.removeHandler(failures)
        dvc_log.setLevel(level)
        for log, (handlers, propagate) in zip(quiet, saved, strict=True):
            log.handlers, log.propagate = handlers, propagate


def _restore(files: dict[Path, bytes | None]) -> None:
    """Put files back as they were (absent where they were absent)."""
    for path, content in files.items():
        if content is None:
            path.unlink(missing_ok=True)
        else:
            with atomic_path(path) as tmp:
                tmp.write_bytes(content)


def initial_batch(params: Params, source: str, data_root: Path) -> tuple[Batch, Holdout]:
    """Training rows and holdout of a new tracked dataset: from a registered dataset (its
    task, data.task or else the dataset's first, binarises the labels; `split.n_p`
    positives are labelled, seeded by `base.seed`), or from a bring-your-own npz file or
    image folder. Data with P and U alone (no labelled test split) gets a PU holdout
    (pu_holdout)."""
    d = params.data
    path = Path(source)
    if path.exists():
        kind = "folder" if path.is_dir() else "npz"
        data = load_dataset(kind, path=str(path), test_fraction=d.test_fraction, seed=d.seed)
        pu = data.pu_train.astype(np.int64)
        batch = check_batch({"x": data.x_train, "pu": pu, "y": data.y_train}, str(path))
        if len(data.y_test) == 0:
            return pu_holdout(params, batch)
        return batch, Holdout(data.x_test, data.y_test)
    from pucl.data.catalog import DATASETS

    if source not in DATASETS or DATASETS[source].classes is None:
        allowed = sorted(n for n, s in DATASETS.items() if s.classes is not None)
        raise DataError(f"data source {source!r} is neither a file or folder nor a dataset "
                        f"with class labels (allowed: a path, or {', '.join(allowed)})")
    data = load_dataset(source, root=str(data_root), test_fraction=d.test_fraction,
                        seed=d.seed, download=d.download)
    tasks = DATASETS[source].tasks  # data.task when it is one of the source's, else its first
    task = get_task(d.task if d.task in tasks else tasks[0])
    keep = np.flatnonzero(task.keep(data.y_train))
    labels = data.y_train[keep]
    split = make_pu_split(labels, task.positive, params.split.n_p, "case_control",
                          np.random.default_rng(params.base.seed))
    x, y = data.x_train[keep], task.binarize(labels)
    test = np.flatnonzero(task.keep(data.y_test))
    return (check_batch({"x": x, "pu": split.labeled.astype(np.int64), "y": y}, source),
            Holdout(data.x_test[test], task.binarize(data.y_test[test]).astype(np.int64)))


def pu_holdout(params: Params, batch: Batch) -> tuple[Batch, Holdout]:
    """Data with P and U alone: `split.val_fraction` of the labelled positives and of the
    other rows (seeded by base.seed; at least 20 of each) become the holdout. Its prior
    is frozen by `freeze_prior` once the first batch is known. Returns (the training rows
    left, the holdout)."""
    split = given_pu_split(batch.pu == 1, params.split.scenario)
    setting = params.split.val_fraction
    labelled = int(split.labeled.sum())
    if resolve_val_fraction(setting, labelled, int((split.used & ~split.labeled).sum()),
                            params.split.scenario == "case_control") <= 0:
        raise DataError("this data has no labelled test split, so the holdout must be a PU "
                        "holdout cut from it like a validation part, and "
                        f"{why_no_validation_part(setting, labelled)}")
    held = validation_rows(split, setting, np.random.default_rng(params.base.seed))
    train = Batch(batch.x[~held], batch.pu[~held], batch.y[~held])
    return train, Holdout(batch.x[held], batch.y[held], batch.pu[held])


def validation_fraction_for(params: Params, pu: np.ndarray, in_shape: tuple[int, ...],
                            labelled_holdout: bool) -> float | str:
    """The split.val_fraction that retraining on training rows with these PU labels (rows
    of `in_shape`) can run with: params' own where its validation part holds enough rows
    (0 too, with a labelled holdout to score on; `auto` wherever it finds a share; any
    where split.folds cross-fits, which holds no part out), else the smallest share that
    does. A DataError when no share up to 0.5 does."""
    fraction = params.split.val_fraction
    labelled = int(np.asarray(pu).sum())
    other, in_u = len(pu) - labelled, params.split.scenario == "case_control"
    if validation_plan(params.split, Recipe.of(params), in_shape, len(pu), labelled)[0]:
        return fraction  # a cross-fitted retrain sets no part aside
    if fraction == 0 and labelled_holdout:
        return 0.0
    if fraction == "auto":
        if resolve_val_fraction(fraction, labelled, other, in_u) > 0 or labelled_holdout:
            return fraction
        fraction = 0.0  # no share will do: refused below, naming the counts
    try:
        check_validation_counts(labelled, other, fraction, in_u)
        if fraction > 0:
            return fraction
    except DataError:
        pass
    smallest = smallest_validation_fraction(labelled, other, in_u)
    if smallest > 0.5:
        raise DataError(f"the tracked training rows hold {labelled} labelled positives and "
                        f"{other} other rows: too few for a validation part of at most half "
                        "of them (allowed: more labelled positives"
                        + (", or split.val_fraction: 0 with this labelled holdout)"
                           if labelled_holdout else ")"))
    return max(smallest, fraction)


def freeze_prior(params: Params, holdout: Holdout, first: Batch) -> Holdout:
    """A PU holdout with U's prior estimated by prior.method on the first batch, the
    training rows tracked with it (from the same draw as the holdout); a labelled
    holdout as it is. The prior's 95% half-width is frozen with it where the estimator
    measured one. Too few rows for the estimator: its DataError, as it says."""
    if holdout.pu is None:
        return holdout
    labelled = first.pu == 1
    in_u = unlabeled_rows(labelled, params.split.scenario)
    prior, halfwidth = prior_with_halfwidth(params, first.x[in_u], first.x[labelled],
                                            strict=True)
    if prior is None:
        raise DataError(f"prior.method '{params.prior.method}' gives no prior for the PU "
                        "holdout (allowed: an estimator such as tedn, or given with "
                        "prior.value)")
    return replace(holdout, prior=prior, prior_halfwidth=halfwidth)


def reestimate_holdout_prior(params: Params, root: Path, directory: Path
                             ) -> tuple[float, float, DataVersion]:
    """Estimate a PU holdout's frozen prior again, by today's prior.method, on the rows
    `pucl data init` estimated it on: the first batch (later batches may have drifted; the
    holdout's rows did not). Returns (the prior before, after, the new data version).
    Only the prior changes: the holdout's rows and every batch stay as they are, and DVC
    keeps the old version."""
    holdout = read_holdout(directory)
    if holdout.prior is None:
        raise DataError(f"the holdout of {directory} is labelled: it has no frozen prior "
                        "to estimate again (a PU holdout has one: pucl data init from an "
                        "npz with x and pu alone)")
    # the holdout's rows and the first batch never change once written, so the estimate
    # (minutes, for a network) runs outside the lock, and `pucl data add` can go on
    first = read_batch(batch_files(directory)[0], like=holdout.x)
    frozen = freeze_prior(params, holdout, first)
    after = frozen.prior
    with exclusive(_lock(directory), "change of the dataset"):
        target = directory / HOLDOUT
        arrays = read_npz(target)  # as stored, so that only the prior changes
        before = float(arrays["prior"])
        arrays["prior"] = np.float64(after)
        arrays.pop(PU_OPTIONAL, None)  # the old estimate's half-width goes with it
        arrays.update({key: value for key, value in frozen.arrays().items()
                       if key == PU_OPTIONAL})
        # the file and its DVC record go back together if DVC cannot record the change
        kept = {path: path.read_bytes() for path in (target, target.with_name(f"{HOLDOUT}.dvc"))
                if path.exists()}
        try:
            write_npz(target, arrays)
            _dvc_add(root, [target])
        except BaseException:
            for path, content in kept.items():
                with atomic_path(path) as tmp:
                    tmp.write_bytes(content)
            raise
        return before, after, current_version(directory)


# an estimate is kept this far inside (0, 1): a frozen holdout's prior must be one
# read_holdout accepts, and the label-free estimates divide by pi and by 1 - pi
PRIOR_MARGIN = 1e-3


def estimate_prior(params: Params, unlabeled: np.ndarray, positives: np.ndarray,
                   strict: bool = False) -> float | None:
    """U's class prior by prior.method (prior.value for `given`), seeded by base.seed, an
    estimate kept within PRIOR_MARGIN of (0, 1); None for `oracle` (these rows carry no
    truth to give) or when the rows are too few for the estimator (`strict`: then the
    estimator's DataError instead)."""
    return prior_with_halfwidth(params, unlabeled, positives, strict)[0]


def prior_with_halfwidth(params: Params, unlabeled: np.ndarray, positives: np.ndarray,
                         strict: bool = False) -> tuple[float | None, float | None]:
    """`estimate_prior`, and the estimate's 95% half-width where its estimator measured
    one (docs/prior.md; None for a given prior)."""
    from pucl.recipe import Recipe
    from pucl.recipe.prior import resolve_prior

    if params.prior.method == "oracle":
        return None, None
    try:
        prior = resolve_prior(Recipe.of(params), lambda: (unlabeled, positives))
    except DataError:  # too few rows for this estimator
        if strict:
            raise
        return None, None
    if prior.source == "given":
        return prior.value, None
    return min(max(prior.value, PRIOR_MARGIN), 1.0 - PRIOR_MARGIN), prior.halfwidth


def take_rows(batch: Batch, rows: int | None, seed: int) -> tuple[Batch, Batch | None]:
    """A seeded random `rows` of the batch, and the rest (None when all are taken)."""
    if rows is None or rows >= len(batch.x):
        return batch, None
    if rows < 1:
        raise DataError(f"--rows {rows}: take at least 1 row")
    order = np.random.default_rng(seed).permutation(len(batch.x))
    first, rest = np.sort(order[:rows]), np.sort(order[rows:])

    def part(idx):
        return Batch(batch.x[idx], batch.pu[idx], batch.y[idx])

    return part(first), part(rest)


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def discard_interrupted_add(root: Path, directory: Path) -> list[Path]:
    """Remove the batch files that DVC's record of the dataset does not list: what a `pucl
    data add` killed between writing its batch and `dvc add` left behind. That add never
    happened (its command failed), so its file goes, and adding the same source again
    adds it once. Holds the dataset's lock: an add still running is waited for, never
    undone. Returns the files removed (each also said on stderr)."""
    with exclusive(_lock(directory), "change of the dataset"):
        return _discard_unrecorded(root, directory)


def _discard_unrecorded(root: Path, directory: Path) -> list[Path]:
    for stale in (directory / BATCHES).glob(".*.tmp"):  # a killed write's (the lock is ours)
        stale.unlink(missing_ok=True)
    record = directory / f"{BATCHES}.dvc"
    listed = _recorded_files(root, record) if record.exists() else None
    if listed is None:  # no record yet, or DVC cannot read it: nothing to compare with
        return []
    extra = [f for f in batch_files(directory) if f.name not in listed]
    for file in extra:
        file.unlink()
        print(f"pucl: removed {file}: an interrupted `pucl data add` wrote it and never "
              "recorded it with DVC (add its source again if it is not added since)",
              file=sys.stderr)
    return extra


def _recorded_files(root: Path, record: Path) -> set[str] | None:
    """The relative names of the files a directory's .dvc record lists (from DVC's cache),
    None when DVC cannot say."""
    from dvc.repo import Repo
    from dvc_data.hashfile.tree import Tree

    try:
        with Repo(str(root)) as repo:
            (stage,) = repo.stage.collect(str(record))  # absolute: DVC reads relative
            # paths from the current directory, not the repository's root
            out = stage.outs[0]
            return {"/".join(key) for key, _, _ in Tree.load(out.cache, out.hash_info)}
    except Exception:
        return None


def _lock(directory: Path) -> Path:
    # beside the directory, not in it: the directory is a DVC dependency of build_split
    return directory.with_name(directory.name + ".lock")


def init_dataset(root: Path, directory: Path, batch: Batch, holdout: Holdout) -> DataVersion:
    """Create the tracked dataset (holdout + first batch) and record it with DVC. Refuses
    when it already holds data: that is `pucl data add`'s job, and nothing is replaced."""
    with exclusive(_lock(directory), "change of the dataset"):
        target, batches = directory / HOLDOUT, directory / BATCHES
        if target.exists() or batches.exists():
            raise DataError(f"the tracked dataset {directory} already holds data "
                            f"({len(batch_files(directory))} batches); add a batch with "
                            "pucl data add, or remove it to start over")
        x_test = holdout.x
        if x_test.shape[1:] != batch.x.shape[1:] or x_test.dtype != batch.x.dtype:
            raise DataError(f"the holdout is {x_test.dtype} {list(x_test.shape[1:])}, the "
                            f"training rows {batch.x.dtype} {list(batch.x.shape[1:])}")
        directory.mkdir(parents=True, exist_ok=True)
        staging = directory / f".{BATCHES}.init"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            np.savez_compressed(staging / "00000.npz", **batch.arrays())
            write_npz(target, holdout.arrays())
            staging.rename(batches)
            _dvc_add(root, [target, batches])
        except BaseException:  # as before: no holdout, no batches
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(batches, ignore_errors=True)
            target.unlink(missing_ok=True)
            raise
        return current_version(directory)


def add_batch(root: Path, directory: Path, source: Path, validate: bool = True
              ) -> tuple[str, int, int, DataVersion]:
    """Append a batch (checked whole first) as the next batch file and record the new
    version with DVC. Returns (batch id, rows, labelled positives, new version)."""
    with exclusive(_lock(directory), "change of the dataset"):
        if not is_initialised(directory):
            raise DataError(f"the tracked dataset {directory} holds no data yet (run: pucl "
                            "data init [SOURCE] first)")
        _discard_unrecorded(root, directory)
        x_test = read_holdout(directory).x
        batch = read_source_batch(source, like=x_test)
        if validate:
            from pucl.validation import enforce, suites

            enforce(suites.batch(batch.x, batch.pu, batch.y, batch.x.shape[1:],
                                 str(batch.x.dtype), x_test))
        number = len(batch_files(directory))
        batch_id = f"{number:05d}"
        target = directory / BATCHES / f"{batch_id}.npz"
        write_npz(target, batch.arrays())
        try:
            _dvc_add(root, [directory / BATCHES])
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        return batch_id, len(batch.x), int(batch.pu.sum()), current_version(directory)


def data_identity(params: Params, root: Path) -> tuple[str, str, str]:
    """(name, digest, source) of the data a run reads, for MLflow's dataset inputs and the
    retrain fingerprint: the tracked dataset's or a given file's content hash; for a
    dataset read from a package or torchvision, a hash of the data params that pick it."""
    import json

    d = params.data
    name = f"{d.dataset}:{d.task}"
    if d.dataset == "tracked" or d.path:
        path = root / (params.paths.dataset if d.dataset == "tracked" else d.path)
        if path.is_dir():
            return name, content_digest(path), str(path)
        if path.exists():
            return name, hashlib.sha256(path.read_bytes()).hexdigest(), str(path)
        return name, "missing", str(path)
    picked = json.dumps(d.model_dump(mode="json"), sort_keys=True)
    return name, hashlib.sha256(picked.encode()).hexdigest(), f"pucl:{d.dataset}"
