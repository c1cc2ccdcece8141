"""Choosing among grouped variants by the paired difference (pucl.reporting.paired_choice),
on constructed runs whose validation scores, and so whose true differences, are known: a
clear winner keeps the choice, a tie goes to the cheaper variant, and runs that scored
other rows are not paired."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pucl.evaluation.label_free import point_estimates
from pucl.reporting.comparison import PAIRED_COLUMN, compare_runs
from pucl.reporting.paired_choice import choose_paired
from pucl.reporting.tables import comparison_table, runs_frame
from pucl.tracking import RunRecord

PRIOR = 0.4


def validation_rows(seed: int, n_p: int = 300, n_u: int = 2000):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.ones(n_p, int), (rng.random(n_u) < PRIOR).astype(int)])
    return y, rng


def scored(y: np.ndarray, right: np.ndarray, n_p: int = 300) -> pd.DataFrame:
    return pd.DataFrame({"index": np.arange(len(y)), "pu": np.r_[np.ones(n_p, int),
                                                                 np.zeros(len(y) - n_p, int)],
                         "in_u": np.r_[np.zeros(n_p, int), np.ones(len(y) - n_p, int)],
                         "score": np.where(right, y, 1 - y).astype(float)})


def runs_of(gains: dict[str, float], minutes: dict[str, float], seeds=(0, 1, 2),
            work: dict[str, float] | None = None, priors: dict[str, float] | None = None):
    """One run per variant and seed: `base` is right with chance 0.9; a variant with gain
    g > 0 is also right on a g / 0.1 share of base's mistakes, g < 0 wrong on a -g / 0.9
    share of its hits; `work`: GMACs per variant (as two stages' parts), none recorded
    where absent; `priors`: the prior a variant's runs estimated and read (PRIOR where
    absent). Returns the run records and each run's validation scores."""
    records, scores = [], {}
    for seed in seeds:
        y, rng = validation_rows(seed)
        base = rng.random(len(y)) < 0.9
        for variant, gain in gains.items():
            draw = rng.random(len(y))
            right = (base | (draw < gain / 0.1)) if gain >= 0 else (base & ~(draw < -gain / 0.9))
            table = scored(y, right)
            run_id = f"{variant}-{seed}"
            labelled, in_u = table["pu"] == 1, table["in_u"] == 1
            prior = (priors or {}).get(variant, PRIOR)
            estimate = point_estimates(table["score"][labelled].to_numpy(),
                                       table["score"][in_u].to_numpy(), prior)["accuracy"]
            done = ({"work_gmac_pretrain": work[variant] / 2,
                     "work_gmac_train_classifier": work[variant] / 2}
                    if variant in (work or {}) else {})
            records.append(RunRecord(run_id, run_id, "FINISHED", 0,
                                     {"variant_param": variant, "base.seed": str(seed)},
                                     {"val_est_accuracy": estimate, "val_prior": prior, **done},
                                     {"variant": variant}, int(minutes[variant] * 60000)))
            scores[run_id] = table
    return records, scores


def choice(gains, minutes, scores_patch=None, work=None, priors=None):
    records, scores = runs_of(gains, minutes, work=work, priors=priors)
    scores.update(scores_patch or {})
    frame = runs_frame({"name": r.name, "run_id": r.run_id, "params": r.params,
                        "metrics": r.metrics, "variant": r.tags["variant"],
                        "minutes": r.minutes} for r in records)
    table = comparison_table(frame, ["variant"])
    return table, choose_paired(table, frame, ["variant"], scores.get)


def test_a_clear_winner_is_chosen_however_dear():
    table, picked = choice({"cheap": 0.0, "dear": 0.05}, {"cheap": 1.0, "dear": 9.0})
    assert [table.loc[i, "variant"] for i in picked.chosen] == ["dear"]
    assert [table.loc[i, "variant"] for i in picked.leaders] == ["dear"]
    (versus,) = picked.versus
    assert not versus.tie and versus.seeds == 3
    assert versus.difference.low <= 0.05 <= versus.difference.high


def test_a_tie_goes_to_the_cheaper_variant():
    """0.002 apart: within the noise of 2,000 rows. The dearer one leads by its mean
    estimate, but the cheaper is chosen."""
    table, picked = choice({"cheap": 0.0, "dear": 0.002}, {"cheap": 1.0, "dear": 9.0})
    (leader,) = picked.leaders
    assert table.loc[leader, "variant"] == "dear"
    assert [v.tie for v in picked.versus] == [True]
    assert [table.loc[i, "variant"] for i in picked.chosen] == ["cheap"]
    assert picked.cells[leader] == "leader" and picked.cells[1 - leader].endswith(" tie")


def test_a_tie_within_a_tenth_of_the_minutes_keeps_the_leader():
    """8.6 against 9.0 minutes is the noise of two runs' clocks, not a saving: the
    leader (the higher estimate) stays."""
    table, picked = choice({"cheap": 0.0, "dear": 0.002}, {"cheap": 8.6, "dear": 9.0})
    (leader,) = picked.leaders
    assert [v.tie for v in picked.versus] == [True]
    assert picked.chosen == [leader] and table.loc[leader, "variant"] == "dear"


def test_a_tie_is_broken_by_work_not_by_minutes():
    """The same work (the same network, epochs and rows) run under different loads: the
    minutes say one is a ninth of the other's, the work says they cost the same, so the
    leader stays; with a third less work the cheaper wins, though its minutes were
    higher."""
    same = {"cheap": 100.0, "dear": 100.0}
    table, picked = choice({"cheap": 0.0, "dear": 0.002}, {"cheap": 1.0, "dear": 9.0},
                           work=same)
    (leader,) = picked.leaders
    assert picked.chosen == [leader] and table.loc[leader, "variant"] == "dear"
    assert table.loc[1 - leader, "gmac_per_seed"] == 100.0
    table, picked = choice({"cheap": 0.0, "dear": 0.002}, {"cheap": 12.0, "dear": 9.0},
                           work={"cheap": 60.0, "dear": 100.0})
    assert [table.loc[i, "variant"] for i in picked.chosen] == ["cheap"]


def test_a_tie_falls_back_to_minutes_where_a_group_has_no_work():
    """Runs recorded before work was counted: the tie goes by minutes, as it did."""
    table, picked = choice({"cheap": 0.0, "dear": 0.002}, {"cheap": 1.0, "dear": 9.0},
                           work={"dear": 100.0})
    assert [table.loc[i, "variant"] for i in picked.chosen] == ["cheap"]


def test_runs_that_scored_other_rows_are_not_paired():
    records, _ = runs_of({"a": 0.0, "b": 0.002}, {"a": 1.0, "b": 9.0})
    shifted = {f"b-{s}": scored(*validation_rows(s)[:1], np.ones(2300, bool)).assign(
        index=lambda t: t["index"] + 1) for s in range(3)}
    table, picked = choice({"a": 0.0, "b": 0.002}, {"a": 1.0, "b": 9.0}, shifted)
    assert [v.difference for v in picked.versus] == [None]
    assert picked.chosen == picked.leaders  # unpaired: the highest estimate, as before


def test_compare_runs_writes_the_paired_column_and_says_why(tmp_path):
    records, scores = runs_of({"cheap": 0.0, "dear": 0.002}, {"cheap": 1.0, "dear": 9.0})
    result = compare_runs(records, tmp_path, ["variant"], scores_of=scores.get)
    assert PAIRED_COLUMN in result.table
    assert result.table.loc[result.table["chosen"], "variant"].tolist() == ["cheap"]
    assert "variant=cheap" in result.choice[0] and "a tie" in result.choice[1]
    text = (tmp_path / "comparison.md").read_text()
    assert "leader" in text and " tie" in text


def test_each_grid_point_gets_its_own_leader_and_choice():
    """Two grid points (split.n_p 100 and 200), each with a clear winner of its own."""
    records = []
    scores = {}
    for n_p, gains in ((100, {"a": 0.05, "b": 0.0}), (200, {"a": 0.0, "b": 0.05})):
        made, made_scores = runs_of(gains, {"a": 1.0, "b": 1.0})
        for r in made:
            r.params["split.n_p"] = str(n_p)
            r.run_id = f"{r.run_id}-{n_p}"
        records += made
        scores.update({f"{k}-{n_p}": v for k, v in made_scores.items()})
    frame = runs_frame({"name": r.name, "run_id": r.run_id, "params": r.params,
                        "metrics": r.metrics, "variant": r.tags["variant"],
                        "minutes": r.minutes} for r in records)
    table = comparison_table(frame, ["variant", "split.n_p"])
    picked = choose_paired(table, frame, ["variant", "split.n_p"], scores.get, ["split.n_p"])
    chosen = {(table.loc[i, "split.n_p"], table.loc[i, "variant"]) for i in picked.chosen}
    assert chosen == {(100, "a"), (200, "b")}


def test_a_pair_carries_the_wider_of_its_runs_prior_errors():
    """Two runs of one split: the paired part allows the wider prior error of the two; a
    run logged before val_prior_error (nan) allows none of its own."""
    from pucl.reporting.paired_choice import paired_part

    y, rng = validation_rows(0)
    a, b = (scored(y, rng.random(len(y)) < 0.9) for _ in range(2))
    assert paired_part(a, b, PRIOR, PRIOR, 0.03, 0.05).prior_error == 0.05
    assert paired_part(a, b, PRIOR, PRIOR, np.nan, 0.04).prior_error == 0.04
    assert paired_part(a, b, PRIOR, PRIOR, np.nan, np.nan).prior_error == 0.0
    other = paired_part(a, b, PRIOR, PRIOR + 0.01, 0.03, 0.03)  # another prior: its midpoint
    assert (other.prior, other.prior_error) == pytest.approx((PRIOR + 0.005, 0.035), abs=1e-15)


@pytest.mark.parametrize("gap", [0.002, 0.06])
def test_priors_apart_pair_at_their_midpoint_with_both_inside_the_error(gap):
    """Two runs of one split that estimated priors `gap` apart: one estimator on two
    machines (its float sums in another order), or two estimators. They pair at the
    midpoint, with an error whose range of priors holds both runs' own, and a difference
    that is the mean of the two read at each prior (it is linear in the prior). A run
    that logged no prior does not pair."""
    from pucl.evaluation.paired import paired_difference, paired_difference_over
    from pucl.reporting.paired_choice import paired_part

    y, rng = validation_rows(0)
    a, b = scored(y, rng.random(len(y)) < 0.95), scored(y, rng.random(len(y)) < 0.8)
    near = PRIOR + gap
    part = paired_part(a, b, PRIOR, near, 0.03, 0.02)
    assert part.prior == pytest.approx(PRIOR + gap / 2, abs=1e-15)
    assert part.prior - part.prior_error <= PRIOR - 0.03 + 1e-15  # run a's own range
    assert part.prior + part.prior_error >= PRIOR + 0.03 - 1e-15
    assert part.prior + part.prior_error >= near + 0.02 - 1e-15  # and run b's
    labelled, in_u = a["pu"] == 1, a["in_u"] == 1
    at = [paired_difference(a["score"][labelled].to_numpy(), a["score"][in_u].to_numpy(),
                            b["score"][labelled].to_numpy(), b["score"][in_u].to_numpy(),
                            prior, bootstrap=0).value for prior in (PRIOR, near)]
    assert at[0] != at[1]  # the TPRs differ, so the prior counts
    assert paired_difference_over([part], bootstrap=0).value == pytest.approx(
        (at[0] + at[1]) / 2, abs=1e-12)
    assert paired_part(a, b, PRIOR, np.nan, 0.03, 0.03) is None


def naive_accuracy(scores: pd.DataFrame, prior: float) -> float:
    """1 - pi - r + 2 pi TPR at a 0.5 cut, from the formula (no clip: these runs keep FPR
    inside [0, 1])."""
    hits = scores["score"].to_numpy() >= 0.5
    tpr, r = hits[scores["pu"] == 1].mean(), hits[scores["in_u"] == 1].mean()
    return 1 - prior - r + 2 * prior * tpr


def test_a_prior_read_high_does_not_win_the_choice():
    """Two variants whose models are the same, one of whose prior estimators reads 0.08
    higher: at its own prior its estimate is higher (accuracy rises with the prior read,
    by 2 TPR - 1 per unit), so ranking each run at its own prior would choose it. Read at
    the seeds' common prior, the two are level: a tie, and the cheaper is chosen."""
    same = {"low_prior": 0.0, "high_prior": 0.0}
    priors = {"low_prior": PRIOR - 0.04, "high_prior": PRIOR + 0.04}
    records, scores = runs_of(same, {"low_prior": 1.0, "high_prior": 1.0}, priors=priors)
    logged = {r.run_id: r.metrics["val_est_accuracy"] for r in records}
    assert all(logged[f"high_prior-{s}"] > logged[f"low_prior-{s}"] + 0.02 for s in range(3))
    table, picked = choice(same, {"low_prior": 1.0, "high_prior": 9.0}, priors=priors)
    by_variant = dict(zip(table["variant"], range(len(table)), strict=True))
    # both runs of a seed score the same rows with models drawn alike, so at the common
    # prior (PRIOR) the difference is that of two draws of one model
    (versus,) = picked.versus
    assert versus.tie and versus.seeds == 3
    truth = np.mean([naive_accuracy(scores[f"{table.loc[picked.leaders[0], 'variant']}-{s}"],
                                    PRIOR)
                     - naive_accuracy(scores[f"{table.loc[versus.group, 'variant']}-{s}"],
                                      PRIOR) for s in range(3)])
    assert versus.difference.value == pytest.approx(truth, abs=1e-12)
    assert picked.chosen == [by_variant["low_prior"]]


def test_a_better_model_under_a_lower_prior_leads():
    """The variant whose model is 3 points better reads a prior 0.1 lower, so its own
    estimate is the lower one; read at the seeds' common prior it leads, and it is
    chosen however dear."""
    gains, priors = {"plain": 0.0, "better": 0.03}, {"plain": PRIOR + 0.05,
                                                     "better": PRIOR - 0.05}
    records, scores = runs_of(gains, {"plain": 1.0, "better": 9.0}, priors=priors)
    logged = {r.run_id: r.metrics["val_est_accuracy"] for r in records}
    assert np.mean([logged[f"better-{s}"] - logged[f"plain-{s}"] for s in range(3)]) < 0
    table, picked = choice(gains, {"plain": 1.0, "better": 9.0}, priors=priors)
    (leader,) = picked.leaders
    assert table.loc[leader, "variant"] == "better" and picked.chosen == [leader]
    assert picked.cells[leader] == "leader, at the seeds' common priors"
    (versus,) = picked.versus
    assert not versus.tie and versus.difference.low > 0
    truth = np.mean([naive_accuracy(scores[f"better-{s}"], PRIOR)
                     - naive_accuracy(scores[f"plain-{s}"], PRIOR) for s in range(3)])
    assert versus.difference.value == pytest.approx(truth, abs=1e-12)


def test_the_choice_widens_a_difference_by_the_runs_logged_prior_error():
    """The same runs, once with val_prior_error logged: the choice's interval around the
    same difference is wider on both sides (the variants' TPR gaps are not zero)."""
    records, scores = runs_of({"base": 0.0, "better": 0.03}, {"base": 1, "better": 1})

    def difference(error):
        frame = runs_frame({"name": r.name, "run_id": r.run_id, "params": r.params,
                            "metrics": {**r.metrics, **({"val_prior_error": error}
                                                        if error else {})},
                            "variant": r.tags["variant"], "minutes": r.minutes}
                           for r in records)
        table = comparison_table(frame, ["variant"])
        return choose_paired(table, frame, ["variant"], scores.get).versus[0].difference

    plain, widened = difference(None), difference(0.2)
    assert widened.value == plain.value
    assert widened.low < plain.low and widened.high > plain.high
