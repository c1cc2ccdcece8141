"""benchmarks/honest_rows.py's bookkeeping, on hand-made rows (no pipeline runs): the
choice reads the validation estimate and never the test accuracy, and the summary
reports only seeds that took no part in the choice."""

from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd
import pytest


@pytest.fixture
def honest(monkeypatch):
    # the script defaults PUCL_TRACKING to off on import: keep that inside this test
    monkeypatch.setenv("PUCL_TRACKING", "off")
    return importlib.import_module("benchmarks.honest_rows")


def row(variant: str, seed: int, role: str, val_est: float, test: float, truth: float,
        low: float | None = None, high: float | None = None, minutes: float = 10.0,
        commit: str = "abc") -> dict:
    return {"preset": "p", "variant": variant, "settings": "default", "seed": seed,
            "role": role, "val_est_accuracy": val_est,
            "val_est_accuracy_low": val_est - 0.05 if low is None else low,
            "val_est_accuracy_high": val_est + 0.05 if high is None else high,
            "val_true_accuracy": truth, "accuracy": test, "minutes": minutes,
            "commit": commit}


def refit(variant: str, seed: int, test: float, commit: str = "abc") -> dict:
    """A refit run: no validation part, so no estimate."""
    nan = float("nan")
    return {**row(variant, seed, "refit", nan, test, nan, low=nan, high=nan, commit=commit)}


def test_the_choice_follows_the_validation_estimate_not_the_test_accuracy(honest):
    # b wins on test accuracy on every seed, a on the validation estimate
    rows = pd.DataFrame([row("a", s, "choose", 0.90, 0.80, 0.9) for s in (0, 1)]
                        + [row("b", s, "choose", 0.85, 0.95, 0.9) for s in (0, 1)]
                        + [row("a", 2, "choose", 0.10, 0.10, 0.1)])  # seed 2 chooses nothing
    table = honest.choose(rows, "p", "default", [0, 1], ["a", "b"])
    assert table.set_index("variant")["chosen"].to_dict() == {"a": True, "b": False}
    assert table.set_index("variant")["n"].to_dict() == {"a": 2, "b": 2}


def test_the_summary_reports_the_fresh_seeds_of_the_chosen_variant(honest):
    rows = pd.DataFrame([
        row("a", 0, "choose", 0.90, 0.50, 0.92),
        row("b", 0, "choose", 0.80, 0.99, 0.80),  # not chosen: not in the summary
        row("a", 3, "report", 0.95, 0.90, 0.92, minutes=8.0),
        # its interval misses the truth
        row("a", 4, "report", 0.80, 0.94, 0.92, low=0.75, high=0.85, minutes=12.0)])
    summary = honest.summarise(rows)
    assert len(summary) == 1
    got = summary.iloc[0]
    assert (got["variant"], got["choose_seeds"], got["report_seeds"]) == ("a", "0", "3 4")
    assert got["accuracy"] == pytest.approx(0.92)  # seeds 3 and 4 only
    assert got["accuracy_std"] == pytest.approx(0.02)
    assert (got["n"], got["minutes_per_seed"]) == (2, pytest.approx(10.0))
    assert got["est_abs_miss"] == pytest.approx((0.02 + 0.03 + 0.12) / 3)
    assert got["est_intervals_held"] == "2/3"
    assert got["model"] == "held_out"


def test_refit_rows_are_their_own_headline_and_the_estimate_reads_the_runs_that_have_one(
        honest):
    rows = pd.DataFrame([
        row("a", 0, "choose", 0.90, 0.50, 0.92, commit="c1"),
        row("b", 0, "choose", 0.80, 0.99, 0.80, commit="c1"),
        row("a", 3, "report", 0.95, 0.90, 0.92, commit="c1"),
        refit("a", 3, 0.93, commit="c2"), refit("a", 4, 0.95, commit="c2")])
    summary = honest.summarise(rows).set_index("model")
    assert sorted(summary.index) == ["held_out", "refit"]
    fresh = summary.loc["refit"]
    assert (fresh["report_seeds"], fresh["n"]) == ("3 4", 2)
    assert fresh["accuracy"] == pytest.approx(0.94)  # the refit runs, not the report run
    # the estimate's record: the two runs of a that held the validation part out
    assert fresh["est_abs_miss"] == pytest.approx((0.02 + 0.03) / 2)
    assert fresh["est_intervals_held"] == "2/2"
    # the choice was made at c1, the refit runs at c2; the held-out report only at c1
    assert (fresh["commit"], summary.loc["held_out", "commit"]) == ("c1 c2", "c1")


def test_each_run_names_its_model_and_the_summary_keeps_models_apart(honest):
    """Under split.folds a run without refit ships the folds' ensemble, not a model that
    held a validation part out: the rows say which, and the summary has a line each."""
    assert honest.reported_model({"val_folds": 2, "val_n_p": 1000}, "ensemble") \
        == "folds_ensemble"
    assert honest.reported_model({"val_folds": 0, "val_n_p": 100}, "refit") == "held_out"
    assert honest.reported_model({"val_folds": 0, "val_n_p": 0}, "refit") == "refit"
    rows = pd.DataFrame([
        row("a", 0, "choose", 0.90, 0.50, 0.92),
        {**row("a", 3, "report", 0.95, 0.90, 0.92), "model": "folds_ensemble"},
        {**row("a", 4, "report", 0.95, 0.80, 0.92), "model": "folds_ensemble"},
        row("a", 5, "report", 0.95, 0.70, 0.92),  # written before the column: by role
        refit("a", 3, 0.93)])
    summary = honest.summarise(rows).set_index("model")
    assert sorted(summary.index) == ["folds_ensemble", "held_out", "refit"]
    assert summary.loc["folds_ensemble", "report_seeds"] == "3 4"
    assert summary.loc["folds_ensemble", "accuracy"] == pytest.approx(0.85)
    assert summary.loc["held_out", "report_seeds"] == "5"


def test_a_refit_run_is_not_the_run_that_held_the_validation_part_out(honest):
    rows = pd.DataFrame([row("a", 3, "report", 0.9, 0.9, 0.9)])
    assert honest.measured(rows, "p", "a", "default", 3)
    assert not honest.measured(rows, "p", "a", "default", 3, refit=True)
    rows = pd.DataFrame([refit("a", 3, 0.9)])
    assert honest.measured(rows, "p", "a", "default", 3, refit=True)
    assert not honest.measured(rows, "p", "a", "default", 3)


def test_the_refit_overrides_hold_no_validation_part_out(honest):
    from pucl.stages.runner import resolve_params

    params = resolve_params(Path(honest.ROOT), honest.REFIT)
    assert params.split.val_fraction == 0


def test_a_preset_without_reported_seeds_has_no_summary_row(honest):
    rows = pd.DataFrame([row("a", 0, "choose", 0.9, 0.9, 0.9)])
    assert honest.summarise(rows).empty


def test_a_resumed_run_skips_only_what_was_measured_with_the_same_settings(honest):
    rows = pd.DataFrame([row("a", 0, "choose", 0.9, 0.9, 0.9)])
    assert honest.measured(rows, "p", "a", "default", 0)
    assert not honest.measured(rows, "p", "a", "default", 1)
    assert not honest.measured(rows, "p", "a", "split.val_fraction=0.2", 0)
    assert not honest.measured(rows, "q", "a", "default", 0)


def paired_rows(gains: dict[str, float], minutes: dict[str, float]):
    """Choosing rows whose kept validation scores differ by known amounts
    (tests/test_paired_choice.runs_of), with a test accuracy that favours the dearest."""
    from tests.test_paired_choice import runs_of

    records, scores = runs_of(gains, minutes)
    rows = pd.DataFrame([{**row(r.tags["variant"], int(r.params["base.seed"]), "choose",
                                r.metrics["val_est_accuracy"],
                                0.99 if minutes[r.tags["variant"]] > 5 else 0.5, 0.9,
                                minutes=minutes[r.tags["variant"]]),
                          "val_prior": r.metrics["val_prior"]} for r in records])
    kept = {(r.tags["variant"], r.params["base.seed"]): scores[r.run_id] for r in records}
    return rows, kept


def test_a_tie_by_the_paired_difference_goes_to_the_cheaper_variant(honest):
    """dear leads by its mean estimate, 0.002 apart: within the noise of the validation
    rows, so the cheaper variant is chosen; dropping the kept scores falls back to the
    mean rule."""
    rows, kept = paired_rows({"cheap": 0.0, "dear": 0.002}, {"cheap": 1.0, "dear": 9.0})
    table = honest.choose(rows, "p", "default", [0, 1, 2], ["cheap", "dear"],
                          lambda key: kept.get(key))
    by = table.set_index("variant")
    assert by.loc["dear", "val_est_accuracy"] > by.loc["cheap", "val_est_accuracy"]
    assert by["chosen"].to_dict() == {"cheap": True, "dear": False}
    assert by.loc["dear", "versus_leader"] == "leader"
    assert by.loc["cheap", "versus_leader"].endswith(" tie")
    unpaired = honest.choose(rows, "p", "default", [0, 1, 2], ["cheap", "dear"])
    assert unpaired.set_index("variant")["chosen"].to_dict() == {"cheap": False, "dear": True}


def test_a_clear_paired_winner_is_chosen_however_dear(honest):
    rows, kept = paired_rows({"cheap": 0.0, "dear": 0.05}, {"cheap": 1.0, "dear": 9.0})
    table = honest.choose(rows, "p", "default", [0, 1, 2], ["cheap", "dear"],
                          lambda key: kept.get(key))
    assert table.set_index("variant")["chosen"].to_dict() == {"cheap": False, "dear": True}


def test_scores_are_kept_under_a_name_each_run_owns(honest, tmp_path):
    out = tmp_path / "honest.csv"
    a = honest.scores_path(out, "fmnist-i", "v", "prior.heldout.folds=5 x=1", 3)
    b = honest.scores_path(out, "fmnist-i", "v", "default", 3)
    assert a.parent == tmp_path / "honest_scores" and a != b
    assert a.name == "fmnist-i__v__prior.heldout.folds_5_x_1__s3.csv.gz"


def test_reported_runs_with_other_report_overrides_are_other_runs_and_headlines(honest):
    """--report-set: the same choice, reported once as the folds' ensemble and once as
    the model trained on every row; each its own headline, neither taken for the other."""
    rows = pd.DataFrame([row("a", 0, "choose", 0.9, 0.90, 0.9),
                         {**refit("a", 3, 0.91), "report_settings": ""},
                         {**refit("a", 3, 0.93), "report_settings": "classifier.shipped=refit"},
                         {**refit("a", 4, 0.95), "report_settings": "classifier.shipped=refit"}])
    assert honest.measured(rows, "p", "a", "default", 3, refit=True)
    assert honest.measured(rows, "p", "a", "default", 4, True, "classifier.shipped=refit")
    assert not honest.measured(rows, "p", "a", "default", 4, refit=True)
    summary = honest.summarise(rows).set_index("report_settings")
    assert summary.loc["", "accuracy"] == pytest.approx(0.91)
    assert summary.loc["", "n"] == 1
    assert summary.loc["classifier.shipped=refit", "accuracy"] == pytest.approx(0.94)
    assert summary.loc["classifier.shipped=refit", "report_seeds"] == "3 4"


def test_rows_written_before_report_overrides_read_as_none(honest):
    rows = pd.DataFrame([row("a", 0, "choose", 0.9, 0.9, 0.9), refit("a", 3, 0.91)])
    assert "report_settings" not in rows
    assert honest.measured(rows, "p", "a", "default", 3, refit=True)
    assert not honest.measured(rows, "p", "a", "default", 3, True, "classifier.shipped=refit")
    assert list(honest.summarise(rows)["report_settings"]) == [""]


def test_report_alone_chooses_and_stops_and_a_reported_seed_cannot_choose(honest):
    """A probe of a candidate on one choosing seed reports nothing (`--report` alone), so a
    one-seed tie-leader is not taken on to an hour of reported seeds."""
    assert honest.arguments(["--preset", "p", "--choose", "0", "--report"]).report == []
    assert honest.arguments(["--preset", "p"]).report == [3, 4, 5, 6, 7]
    with pytest.raises(SystemExit):
        honest.arguments(["--preset", "p", "--choose", "0", "3", "--report", "3"])


def test_choose_and_stop_ends_after_the_choice_without_a_reported_row(honest, tmp_path,
                                                                      monkeypatch, capsys):
    """`--report` alone on rows already measured: nothing runs, the choice is printed, the
    summary is written, and the script ends there (it used to look up the reported rows
    it had been told not to run, and failed)."""
    variants = honest.candidates("fmnist-i", ["default", "pucl_pupl"])
    out = tmp_path / "honest.csv"
    rows = [{**row(name, 0, "choose", est, 0.5, 0.9), "preset": "fmnist-i"}
            for name, est in zip(variants, (0.93, 0.80), strict=True)]
    pd.DataFrame(rows).to_csv(out, index=False)
    monkeypatch.setattr("sys.argv", ["honest_rows.py", "--preset", "fmnist-i", "--choose",
                                     "0", "--report", "--variants", "default", "pucl_pupl",
                                     "--out", str(out)])
    honest.main()
    leader = next(iter(variants))
    assert f"chosen by the validation estimate on seeds [0]: {leader}" in capsys.readouterr().out
    assert honest.summary_path(out).exists()
    assert len(pd.read_csv(out)) == 2  # nothing was run
