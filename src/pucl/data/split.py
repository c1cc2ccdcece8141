"""PU split (docs/pipeline.md): labelled positives and the unlabeled set U.

Scenarios:
- case_control: U is the whole training set (it contains the labelled positives too),
  as in the papers' code.
- single_dataset: U is the training set minus the labelled positives.

With `prior`, U is subsampled so that its fraction of positives equals that value.

A validation part (`validation_rows`) can then be set aside: a seeded share of the
labelled positives and of the other used rows, which no training step sees. Its labelled
positives and its members of U are the held-out P and U of the label-free estimates
(`pucl.evaluation.label_free`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pucl.errors import DataError

# the fewest held-out labelled positives, and unlabeled rows, a validation estimate reads
MIN_VALIDATION_ROWS = 20


@dataclass(frozen=True)
class PUSplit:
    """Per training row: labelled (1) or not, and membership of U. Rows not used by the
    split (dropped by prior subsampling) have both flags false."""

    labeled: np.ndarray  # bool [n_train]
    in_u: np.ndarray  # bool [n_train]

    @property
    def used(self) -> np.ndarray:
        return self.labeled | self.in_u

    def summary(self, y_binary: np.ndarray) -> dict[str, float | int]:
        n_p = int(self.labeled.sum())
        n_u = int(self.in_u.sum())
        return {
            "n_p": n_p,
            "n_u": n_u,
            "n_train": int(self.used.sum()),
            # NaN when U holds rows of unknown label (bring-your-own data)
            "prior_u_true": _known_mean(y_binary[self.in_u]),
            "gamma": n_p / n_u if n_u else float("inf"),
        }


def _known_mean(y: np.ndarray) -> float:
    """The positive fraction, or NaN when any label is unknown (-1): a mean over the known
    ones only would be biased, since the labelled positives are always known."""
    return float(y.mean()) if len(y) and (y >= 0).all() else float("nan")


def unlabeled_rows(labeled: np.ndarray, scenario: str) -> np.ndarray:
    """bool per row: a member of U, given the labelled positives. Under case_control U is
    every row (the labelled positives too); under single_dataset, the rows not labelled."""
    if scenario not in ("case_control", "single_dataset"):
        raise ValueError(f"scenario must be case_control or single_dataset, got {scenario!r}")
    labeled = np.asarray(labeled, dtype=bool)
    return np.ones_like(labeled) if scenario == "case_control" else ~labeled


def given_pu_split(labeled: np.ndarray, scenario: str) -> PUSplit:
    """The split of bring-your-own data: its labelled positives as given; U is every other
    row, plus the labelled ones under case_control."""
    labeled = np.asarray(labeled, dtype=bool)
    in_u = unlabeled_rows(labeled, scenario)
    if not in_u.any():
        raise DataError("the unlabeled set U is empty")
    return PUSplit(labeled=labeled, in_u=in_u)


def balanced_counts(n: int, classes: np.ndarray, rng: np.random.Generator) -> dict[int, int]:
    """Spread n over classes as evenly as possible; a seeded choice gets the remainder."""
    base, extra = divmod(n, len(classes))
    lucky = set(rng.choice(classes, size=extra, replace=False).tolist()) if extra else set()
    return {int(c): base + (1 if c in lucky else 0) for c in classes}


def make_pu_split(
    labels: np.ndarray,
    positive_classes: tuple[int, ...],
    n_p: int,
    scenario: str,
    rng: np.random.Generator,
    prior: float | None = None,
) -> PUSplit:
    """Draw n_p labelled positives balanced over the positive classes, without replacement."""
    if scenario not in ("case_control", "single_dataset"):
        raise ValueError(f"scenario must be case_control or single_dataset, got {scenario!r}")
    labels = np.asarray(labels)
    y = np.isin(labels, positive_classes)
    present = np.array(sorted(set(labels[y].tolist())), dtype=np.int64)
    if len(present) == 0:
        raise DataError("the training set holds no positive example of the task")
    if n_p > int(y.sum()):
        raise DataError(f"split.n_p = {n_p} exceeds the {int(y.sum())} training positives")

    counts = balanced_counts(n_p, present, rng)
    labeled = np.zeros(len(labels), dtype=bool)
    for cls, k in counts.items():
        pool = np.flatnonzero(labels == cls)
        if k > len(pool):
            raise DataError(
                f"split.n_p = {n_p} needs {k} labelled examples of class {cls}, "
                f"which has only {len(pool)}; allowed n_p here: at most "
                f"{len(pool) * len(present)}"
            )
        labeled[rng.choice(pool, size=k, replace=False)] = True

    candidates = np.ones(len(labels), dtype=bool)
    if scenario == "single_dataset":
        candidates &= ~labeled
    in_u = candidates if prior is None else _subsample_to_prior(candidates, y, prior, rng)
    if not in_u.any():
        raise DataError("the unlabeled set U is empty")
    return PUSplit(labeled=labeled, in_u=in_u)


def _subsample_to_prior(
    candidates: np.ndarray, y: np.ndarray, prior: float, rng: np.random.Generator
) -> np.ndarray:
    """Largest subset of the candidates whose positive fraction is `prior`."""
    pos = np.flatnonzero(candidates & y)
    neg = np.flatnonzero(candidates & ~y)
    n_pos = min(len(pos), int(np.floor(prior / (1 - prior) * len(neg))))
    n_neg = min(len(neg), int(round(n_pos * (1 - prior) / prior)))
    if n_pos == 0 or n_neg == 0:
        raise DataError(f"split.prior = {prior} leaves U without positives or negatives")
    keep = np.zeros_like(candidates)
    keep[rng.choice(pos, size=n_pos, replace=False)] = True
    keep[rng.choice(neg, size=n_neg, replace=False)] = True
    return keep


def cap_unlabeled(split: PUSplit, most: int | None, rng: np.random.Generator) -> PUSplit:
    """`split` with U cut to at most `most` rows: a uniform draw of U's rows (labelled
    rows of a case-control U included, at the same chance, so U stays a sample of all
    the data); every labelled positive stays labelled. No draw when U is within `most`
    (None: no cap), so a split under the cap is the same with or without it."""
    rows = np.flatnonzero(split.in_u)
    if most is None or len(rows) <= most:
        return split
    in_u = np.zeros_like(split.in_u)
    in_u[rng.choice(rows, size=most, replace=False)] = True
    return PUSplit(labeled=split.labeled, in_u=in_u)


def validation_counts(n_labelled: int, n_other: int, fraction: float, labelled_in_u: bool
                      ) -> tuple[int, int]:
    """(labelled positives, members of U) a validation part of `fraction` holds out of a
    split with these counts of labelled and other used rows (labelled_in_u: case_control,
    where U holds the labelled positives too)."""
    n_p, n_rest = int(round(fraction * n_labelled)), int(round(fraction * n_other))
    return n_p, n_rest + (n_p if labelled_in_u else 0)


def smallest_validation_fraction(n_labelled: int, n_other: int, labelled_in_u: bool) -> float:
    """The smallest share, in hundredths, whose validation part holds MIN_VALIDATION_ROWS
    labelled positives and members of U (each count rounded as validation_rows rounds
    it); above 0.5 when no allowed share will do."""
    u_rows = n_other + (n_labelled if labelled_in_u else 0)
    needed = max((MIN_VALIDATION_ROWS - 0.5) / max(n, 1) for n in (n_labelled, u_rows))
    return float(np.ceil(needed * 100) / 100)


AUTO = "auto"
AUTO_SHARE = 0.1  # split.val_fraction auto: this share where it holds enough rows


def resolve_val_fraction(setting: float | str, n_labelled: int, n_other: int,
                         labelled_in_u: bool) -> float:
    """split.val_fraction as a share of these counts: a number is itself; `auto` is 0.1
    where that part holds MIN_VALIDATION_ROWS labelled positives and members of U, else
    the smallest share that does (at most 0.5), else 0: too few labelled positives for
    any validation part."""
    if setting != AUTO:
        return float(setting)
    if min(validation_counts(n_labelled, n_other, AUTO_SHARE, labelled_in_u)) >= \
            MIN_VALIDATION_ROWS:
        return AUTO_SHARE
    smallest = smallest_validation_fraction(n_labelled, n_other, labelled_in_u)
    return smallest if smallest <= 0.5 else 0.0


AUTO_FOLDS = 5  # split.folds auto: this many folds where cross-fitting is cheap
# ... which is up to this many training rows: each fold refits the classifier, seconds on
# tables and MNIST-5k, minutes on F-MNIST's 60,000 images (reports/evaluation)
CROSSFIT_MAX_ROWS = 20_000


def resolve_folds(setting: int | str, val_fraction: float | str, n_rows: int,
                  n_labelled: int, refits: bool = True) -> int:
    """split.folds as a number of folds, 0 for a validation part instead. A number is
    itself. `auto` cross-fits with AUTO_FOLDS folds where split.val_fraction is auto too
    (no share was asked for), the classifier `refits` per fold (a head that learns, not
    one ready-made by pretraining), the task's training rows number at most
    CROSSFIT_MAX_ROWS and the labelled positives at least MIN_VALIDATION_ROWS; else 0."""
    if setting != AUTO:
        return int(setting)
    cheap = n_rows <= CROSSFIT_MAX_ROWS
    enough = n_labelled >= MIN_VALIDATION_ROWS
    return AUTO_FOLDS if val_fraction == AUTO and refits and cheap and enough else 0


def why_no_validation_part(setting: float | str, n_labelled: int) -> str:
    """Why split.val_fraction (`setting`, resolved to 0) sets no validation part aside,
    for a refusal's line."""
    if setting != AUTO:
        return ("split.val_fraction = 0 turns them off (allowed here: a val_fraction above "
                "0, e.g. 0.1)")
    return (f"its {n_labelled} labelled positives are too few for a validation part of at "
            f"most half of them ({MIN_VALIDATION_ROWS} needed in it; allowed: more labelled "
            "positives)")


def check_validation_counts(n_labelled: int, n_other: int, fraction: float,
                            labelled_in_u: bool, setting: str = "split.val_fraction") -> None:
    """Refuse a validation part with fewer than MIN_VALIDATION_ROWS labelled positives or
    members of U, naming its counts and the smallest share (of `setting`) that would do."""
    if fraction <= 0:
        return
    n_p, n_u = validation_counts(n_labelled, n_other, fraction, labelled_in_u)
    if min(n_p, n_u) >= MIN_VALIDATION_ROWS:
        return
    smallest = smallest_validation_fraction(n_labelled, n_other, labelled_in_u)
    short = setting.rsplit(".", 1)[-1]
    allowed = (f"a {short} of at least {smallest:g} here, or 0 for no validation part"
               if smallest <= 0.5 else "0: this split has too few rows for a validation part")
    raise DataError(
        f"{setting} = {fraction} holds out {n_p} labelled positives and {n_u} "
        f"unlabeled rows; a validation estimate needs at least {MIN_VALIDATION_ROWS} of "
        f"each (allowed: {allowed})")


def validation_rows(split: PUSplit, fraction: float | str, rng: np.random.Generator,
                    setting: str = "split.val_fraction") -> np.ndarray:
    """bool [n_train]: the used rows set aside for validation, `fraction` (a share, or
    `auto`: resolve_val_fraction) of the labelled positives and of the other used rows
    (each rounded), drawn apart so that both counts are exact. Under case_control the
    held-out labelled positives stay members of the held-out U, as in training. Refuses a
    part too small to estimate from (check_validation_counts)."""
    held = np.zeros(len(split.labeled), dtype=bool)
    others = split.used & ~split.labeled
    n_labelled, n_other = int(split.labeled.sum()), int(others.sum())
    labelled_in_u = bool((split.in_u & split.labeled).any())
    fraction = resolve_val_fraction(fraction, n_labelled, n_other, labelled_in_u)
    if fraction <= 0:
        return held
    check_validation_counts(n_labelled, n_other, fraction, labelled_in_u, setting)
    for stratum in (split.labeled, others):
        rows = np.flatnonzero(stratum)
        held[rng.choice(rows, size=int(round(fraction * len(rows))), replace=False)] = True
    return held


def check_folds(folds: int, n_labelled: int) -> None:
    """Refuse cross-fitting folds that leave a fold without a labelled positive."""
    if not 2 <= folds <= n_labelled:
        raise DataError(f"split.folds = {folds} needs a labelled positive in every fold, "
                        f"and the training rows hold {n_labelled} (allowed: 2 to "
                        f"{max(n_labelled, 2)}, or 0 for a validation part)")


def crossfit_folds(labelled: np.ndarray, in_u: np.ndarray, folds: int, seed: int
                   ) -> np.ndarray:
    """int [n]: each training row's fold, 0 to folds - 1, drawn with `seed` so that every
    fold holds an equal share (to a row) of the labelled positives, of U's other members
    and of the rows in neither. A row keeps one fold in every role it plays: under
    case_control a labelled positive is out of its fold as a positive and as a member of
    U alike."""
    labelled, in_u = np.asarray(labelled, bool), np.asarray(in_u, bool)
    check_folds(folds, int(labelled.sum()))
    strata = np.where(labelled, 0, np.where(in_u, 1, 2))
    fold = np.empty(len(labelled), dtype=np.int64)
    rng = np.random.default_rng(seed)
    for stratum in np.unique(strata):
        rows = rng.permutation(np.flatnonzero(strata == stratum))
        fold[rows] = np.arange(len(rows)) % folds
    return fold
