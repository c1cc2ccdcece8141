"""Choosing among grouped variants by the paired difference of their label-free accuracies
(pucl.evaluation.paired), for `pucl compare --by`, `pucl bench` and the sweeps.

The group with the highest mean validation estimate leads. Each other group is compared
with it on the validation rows both scored: seed by seed (runs with the same `base.seed`
share a split, so the same held-out P and U), the leader's accuracy minus the other's,
averaged over the seeds both have, with a paired bootstrap interval. A group whose
interval holds 0 ties with the leader, and among the leader and the groups tied with it
the cheapest is chosen if it saves at least a tenth of the leader's cost, else the
leader: when the held-out rows cannot tell two variants apart, the clearly cheaper one
is the better buy. The cost is the work per seed (GMACs, pucl.runtime.work), the same
however busy the machine was; minutes per seed only where a tied group's runs predate
counting it (two runs of one variant on a shared machine differed by a quarter in
minutes, so a tie broken by them was a coin toss). Groups that cannot be paired (no seed
in common, other rows, another prior) are only ranked by their mean estimate, as before.
Two priors within PRIOR_MATCH are one estimator's on two machines, and do pair.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pucl.evaluation.paired import Difference, PairedRows, paired_difference_over
from pucl.reporting.tables import CHOICE_METRIC

SEED = "base.seed"
CLEARLY_CHEAPER = 0.9  # a tied group must cost at most this share of the leader's cost
COSTS = ("gmac_per_seed", "minutes_per_seed")  # a tie's cost: the first every tied group has
ScoresOf = Callable[[str], "pd.DataFrame | None"]  # run id -> its validation_scores.csv
# Priors closer than this pair, at their midpoint. One estimator whose float sums ran in
# another order differs by about 0.001 (the same seed's TED^n on F-MNIST-II: 0.7174 on a
# Xeon, 0.7186 on an EPYC); two settings of the prior mostly by 0.02-0.09 (reports/fmnist,
# five prior folds), and where they come closer the error widened by half the gap covers it
PRIOR_MATCH = 0.005


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


def paired_part(a: pd.DataFrame, b: pd.DataFrame, prior_a: float, prior_b: float,
                error_a: float = 0.0, error_b: float = 0.0) -> PairedRows | None:
    """Two runs' validation scores as one paired part, or None when they did not score
    the same rows (index, pu, in_u) or read priors PRIOR_MATCH or more apart. The part's
    prior error is the wider of the two runs' (`val_prior_error`; a run logged before it:
    none); priors that differ within PRIOR_MATCH are read at their midpoint, that error
    widened by half their gap, so that the priors it allows hold both runs' own."""
    gap = abs(prior_a - prior_b)
    if (len(a) == 0 or len(a) != len(b) or not gap < PRIOR_MATCH
            or not all((a[c].to_numpy() == b[c].to_numpy()).all()
                       for c in ("index", "pu", "in_u"))):
        return None
    labelled, in_u = a["pu"].to_numpy() == 1, a["in_u"].to_numpy().astype(bool)
    sa, sb = a["score"].to_numpy(float), b["score"].to_numpy(float)
    error = np.nanmax([error_a, error_b, 0.0]) + gap / 2.0
    return PairedRows(sa[labelled], sa[in_u], sb[labelled], sb[in_u],
                      float((prior_a + prior_b) / 2.0), float(error))


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
        leader = int(rows.idxmax())
        leaders.append(leader)
        cells[leader] = "leader"
        tied = [leader]
        for row in rows.index.drop(leader):
            parts = _parts(runs[keys[leader]], runs[keys[row]], scores)
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


def _parts(lead: pd.DataFrame, other: pd.DataFrame,
           scores: Callable[[str], pd.DataFrame | None]) -> list[PairedRows]:
    """One paired part per seed both groups ran (their first run of that seed)."""
    parts = []
    for seed_value, lead_runs in lead.groupby(SEED, sort=True):
        others = other[other[SEED] == seed_value]
        if others.empty:
            continue
        a, b = lead_runs.iloc[0], others.iloc[0]
        sa, sb = scores(a["run_id"]), scores(b["run_id"])
        if sa is None or sb is None:
            continue
        part = paired_part(sa, sb, a.get("val_prior", np.nan), b.get("val_prior", np.nan),
                           a.get("val_prior_error", np.nan), b.get("val_prior_error", np.nan))
        if part is not None:
            parts.append(part)
    return parts
