"""Choosing among grouped variants by the paired difference of their label-free accuracies
(pucl.evaluation.paired), for `pucl compare --by`, `pucl bench` and the sweeps.

Every run of one seed (runs with the same `base.seed` share a split, so the same held-out
P and U, and the same true prior) is read at one prior: the midpoint of the priors those
runs estimated, with the prior's error widened by half their spread (`common_prior`).
Variants that estimate the prior differently are then compared on their models, not on
their priors: a label-free accuracy rises with the prior it reads, so ranking each run at
its own prior favours whichever estimator reads higher. Where every run of a seed read
the same prior, this is each run's own estimate, as logged.

The group with the highest mean estimate leads. Each other group is compared with it
seed by seed on the validation rows both scored, the leader's accuracy minus the
other's, averaged over the seeds both have, with a paired bootstrap interval. A group
whose interval holds 0 ties with the leader, and among the leader and the groups tied
with it the cheapest is chosen if it saves at least a tenth of the leader's cost, else
the leader: when the held-out rows cannot tell two variants apart, the clearly cheaper
one is the better buy. The cost is the work per seed (GMACs, pucl.runtime.work), the same
however busy the machine was; minutes per seed only where a tied group's runs predate
counting it (two runs of one variant on a shared machine differed by a quarter in
minutes, so a tie broken by them was a coin toss). Groups that cannot be paired (no seed
in common, other rows, no prior logged) are only ranked by their mean estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pucl.evaluation.label_free import point_estimates
from pucl.evaluation.paired import Difference, PairedRows, paired_difference_over
from pucl.reporting.tables import CHOICE_METRIC

SEED = "base.seed"
CLEARLY_CHEAPER = 0.9  # a tied group must cost at most this share of the leader's cost
COSTS = ("gmac_per_seed", "minutes_per_seed")  # a tie's cost: the first every tied group has
ScoresOf = Callable[[str], "pd.DataFrame | None"]  # run id -> its validation_scores.csv
Common = dict[object, tuple[float, float]]  # seed -> (the prior its runs are read at,
#                                              half the spread of their priors)


@dataclass(frozen=True)
class Versus:
    """One group against the leader: leader - group, over `seeds`."""

    group: int  # the group's row in the comparison table
    difference: Difference | None  # None: the two could not be paired
    seeds: int

    @property
    def tie(self) -> bool:
        return self.difference is not None and self.difference.verdict() == "tie"


@dataclass(frozen=True)
class PairedChoice:
    """Per row of the comparison table: whether it is chosen (`picks`) and how it stands
    against its partition's leader (`cells`)."""

    picks: np.ndarray  # bool per row: the leader, or the cheapest group tied with it
    cells: list[str]  # "leader", "leader - this [low, high]" (+ " tie"), or "not paired"
    leaders: list[int]  # the row of each partition's highest mean estimate
    versus: list[Versus]

    @property
    def chosen(self) -> list[int]:
        return [int(i) for i in np.flatnonzero(self.picks)]


def common_prior(priors) -> tuple[float, float]:
    """The prior that runs of one split are read at: the midpoint of their finite `priors`,
    and half the distance between the lowest and the highest (nan, nan without any). The
    range of priors the midpoint allows, widened by that half, holds every run's own."""
    values = np.array([p for p in priors if np.isfinite(p)], dtype=float)
    if not len(values):
        return float("nan"), float("nan")
    low, high = float(values.min()), float(values.max())
    return (low + high) / 2.0, (high - low) / 2.0


def paired_part(a: pd.DataFrame, b: pd.DataFrame, prior_a: float, prior_b: float,
                error_a: float = 0.0, error_b: float = 0.0,
                common: tuple[float, float] | None = None) -> PairedRows | None:
    """Two runs' validation scores as one paired part, or None when they did not score
    the same rows (index, pu, in_u) or either logged no prior. The part is read at
    `common` (common_prior of every run of their split), or without it at the midpoint
    of their own two priors; its prior error is the wider of the two runs'
    (`val_prior_error`; a run logged before it: none), widened by half the spread of the
    priors, so that the priors it allows hold each run's own range."""
    if (len(a) == 0 or len(a) != len(b) or not np.isfinite([prior_a, prior_b]).all()
            or not all((a[c].to_numpy() == b[c].to_numpy()).all()
                       for c in ("index", "pu", "in_u"))):
        return None
    prior, half_spread = common if common is not None else common_prior([prior_a, prior_b])
    error = np.nanmax([error_a, error_b, 0.0]) + half_spread
    return PairedRows(*p_and_u(a), *p_and_u(b), float(prior), float(error))


def p_and_u(scores: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A validation_scores table's scores of the labelled positives and of U."""
    labelled, in_u = scores["pu"].to_numpy() == 1, scores["in_u"].to_numpy().astype(bool)
    values = scores["score"].to_numpy(float)
    return values[labelled], values[in_u]


def estimate_at(scores: pd.DataFrame, prior: float) -> float:
    """A run's label-free accuracy (its logged `val_est_accuracy`) read at another prior,
    from its validation scores."""
    return point_estimates(*p_and_u(scores), prior)["accuracy"]


def choose_paired(table: pd.DataFrame, frame: pd.DataFrame, by: Sequence[str],
                  scores_of: ScoresOf, within: Sequence[str] = (), seed: int = 0
                  ) -> PairedChoice | None:
    """The choice among `table`'s groups (comparison_table with `by`) of `frame`'s runs,
    one per value of `within` (a grid point; all rows without); None where no group has
    an estimate. Oracle groups are never chosen."""
    if CHOICE_METRIC not in table or SEED not in frame:
        return None
    score = table[CHOICE_METRIC]
    if "prior_source" in table:
        score = score.where(table["prior_source"] != "oracle")
    if score.notna().sum() == 0:
        return None
    keys = [tuple(row) for row in table[list(by)].astype(str).itertuples(index=False)]
    group_of = frame[list(by)].astype(str).apply(tuple, axis=1)
    runs = {k: frame[group_of == k] for k in keys}
    loaded: dict[str, pd.DataFrame | None] = {}

    def scores(run_id: str) -> pd.DataFrame | None:
        if run_id not in loaded:
            loaded[run_id] = scores_of(run_id)
        return loaded[run_id]

    partition = (table[list(within)].astype(str).agg("|".join, axis=1) if within
                 else pd.Series("", index=table.index))
    picks, cells = np.zeros(len(table), dtype=bool), [""] * len(table)
    leaders, versus = [], []
    for _, rows in score.dropna().groupby(partition[score.notna()], sort=False):
        group_runs = {row: runs[keys[row]] for row in rows.index}
        common = seed_priors(pd.concat(group_runs.values()))
        read = {row: mean_at(group_runs[row], common, scores, rows[row]) for row in rows.index}
        leader = int(pd.Series({row: value for row, (value, _) in read.items()}).idxmax())
        leaders.append(leader)
        reread = any(moved for _, moved in read.values())
        cells[leader] = "leader, at the seeds' common priors" if reread else "leader"
        tied = [leader]
        for row in rows.index.drop(leader):
            parts = _parts(group_runs[leader], group_runs[row], scores, common)
            v = Versus(int(row), paired_difference_over(parts, seed=seed) if parts else None,
                       len(parts))
            versus.append(v)
            d = v.difference
            cells[row] = ("not paired" if d is None else
                          f"{d.value:+.4f} [{d.low:+.4f}, {d.high:+.4f}]"
                          + (" tie" if v.tie else ""))
            if v.tie:
                tied.append(v.group)
        picks[cheapest_tied(tied, leader, tie_cost(table, tied))] = True
    return PairedChoice(picks, cells, leaders, versus)


def tie_cost(table: pd.DataFrame, tied: list[int]) -> pd.Series:
    """The cost a tie among the `tied` rows is broken by: the first of COSTS that every
    one of them has (work, then minutes); all nan when none has one."""
    for name in COSTS:
        if name in table and table.loc[tied, name].notna().all():
            return table[name]
    return pd.Series(np.nan, index=table.index)


def cheapest_tied(tied: list[int], leader: int, cost: pd.Series) -> int:
    """Among the leader and the groups tied with it, the cheapest that costs at most
    CLEARLY_CHEAPER of the leader's cost; else the leader. A smaller saving is not worth
    giving up the higher estimate (and in minutes it would be noise)."""
    def of(row: int) -> float:
        return np.inf if pd.isna(cost[row]) else float(cost[row])

    cheaper = [r for r in tied if r != leader and of(r) <= CLEARLY_CHEAPER * of(leader)]
    return min(cheaper, key=of) if cheaper else leader


def seed_priors(runs: pd.DataFrame) -> Common:
    """common_prior of each seed's runs (their `val_prior`), for the seeds that logged one."""
    if "val_prior" not in runs:
        return {}
    found = {seed_value: common_prior(group["val_prior"].astype(float))
             for seed_value, group in runs.groupby(SEED, sort=True)}
    return {k: v for k, v in found.items() if np.isfinite(v[0])}


def mean_at(group: pd.DataFrame, common: Common,
            scores: Callable[[str], pd.DataFrame | None], logged: float
            ) -> tuple[float, bool]:
    """A group's mean estimate with each run read at its seed's common prior, and whether
    any run was read again; `logged` (the table's mean) where every run already read it,
    or where the scores of a run that did not are missing (that run stays at its own
    prior)."""
    values, moved = [], False
    for _, run in group.iterrows():
        value, prior = run.get(CHOICE_METRIC, np.nan), run.get("val_prior", np.nan)
        target = common.get(run[SEED], (np.nan, np.nan))[0]
        kept = scores(run["run_id"]) if np.isfinite([prior, target]).all() and \
            prior != target else None
        if kept is not None:
            value, moved = estimate_at(kept, target), True
        values.append(value)
    return (float(np.nanmean(values)), True) if moved else (float(logged), False)


def _parts(lead: pd.DataFrame, other: pd.DataFrame,
           scores: Callable[[str], pd.DataFrame | None], common: Common) -> list[PairedRows]:
    """One paired part per seed both groups ran (their first run of that seed), read at
    the seed's common prior."""
    parts = []
    for seed_value, lead_runs in lead.groupby(SEED, sort=True):
        others = other[other[SEED] == seed_value]
        if others.empty or seed_value not in common:
            continue
        a, b = lead_runs.iloc[0], others.iloc[0]
        sa, sb = scores(a["run_id"]), scores(b["run_id"])
        if sa is None or sb is None:
            continue
        part = paired_part(sa, sb, a.get("val_prior", np.nan), b.get("val_prior", np.nan),
                           a.get("val_prior_error", np.nan), b.get("val_prior_error", np.nan),
                           common=common[seed_value])
        if part is not None:
            parts.append(part)
    return parts
