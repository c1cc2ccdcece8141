"""The tabular benchmark's peers and protocol (benchmarks/tabular.py): each peer does the
job its paper describes on data with a known answer, the tables are PU as stated, and
the choice reads only the validation estimates of the choose rows."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from pucl.errors import ParamsError


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.tabular")


@pytest.fixture(scope="module")
def peers(bench):
    return importlib.import_module("tabular_peers")


def _two_gaussians(prior: float, n: int = 1200, seed: int = 0):
    """Two well-separated classes in 5-d, U = every row, a third of the positives labelled."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < prior).astype(int)
    x = rng.normal(size=(n, 5)) + 3.0 * y[:, None]
    s = np.zeros(n, int)
    positives = np.flatnonzero(y == 1)
    s[rng.choice(positives, len(positives) // 3, replace=False)] = 1
    x_test = rng.normal(size=(400, 5))
    y_test = (rng.random(400) < prior).astype(int)
    return x, s, x_test + 3.0 * y_test[:, None], y_test, float(y.mean())


@pytest.mark.parametrize("prior", [0.3, 0.7])
@pytest.mark.parametrize("name", ["nnpu_mlp", "bagging_pu", "elkan_noto"])
def test_each_peer_separates_two_separated_classes_with_the_true_prior(peers, name, prior):
    x, s, x_test, y_test, true = _two_gaussians(prior)
    predicted = peers.PEERS[name](x, s, x_test, true, 0).test
    # the Bayes rule errs on about 1% here; a peer that ignored the prior or swapped
    # the classes would read near the prior or below
    assert (predicted == y_test).mean() > 0.93


def test_upu_reads_the_prior_its_risk_is_given(peers):
    # uPU's risk weighs P by the prior: with a prior far too low it calls fewer rows
    # positive than with the true one
    x, s, x_test, _, true = _two_gaussians(0.5)
    low = peers.PEERS["upu_mlp"](x, s, x_test, 0.05, 0).test.mean()
    right = peers.PEERS["upu_mlp"](x, s, x_test, true, 0).test.mean()
    assert low < right - 0.1


def test_bagging_calls_more_rows_positive_the_higher_its_prior(peers):
    # overlapping classes, so that the threshold decides the share: the prior sets U's
    # positive count, and fresh rows follow it
    rng = np.random.default_rng(1)
    y = (rng.random(1500) < 0.4).astype(int)
    x = rng.normal(size=(1500, 3)) + 1.0 * y[:, None]
    s = ((y == 1) & (rng.random(1500) < 0.4)).astype(int)
    fresh = rng.normal(size=(3000, 3)) + 1.0 * (rng.random(3000) < 0.4)[:, None]
    shares = [peers.bagging_pu(x, s, fresh, prior, 0, rounds=30).test.mean()
              for prior in (0.2, 0.4, 0.6)]
    assert shares[0] + 0.1 < shares[1] < shares[2] - 0.1, shares


@pytest.mark.parametrize("table", ["breast_cancer", "synthetic_0.3_101"])
def test_tables_are_pu_as_stated(bench, table):
    x, s, y, x_test, y_test = bench.pu_rows(table, 1)
    spec = bench.TABLES[table]
    assert set(np.flatnonzero(s)) <= set(np.flatnonzero(y == 1))  # only positives labelled
    wanted = spec.labelled if spec.labelled > 1 else round(spec.labelled * y.sum())
    assert s.sum() == wanted
    assert np.allclose(x.mean(0), 0, atol=1e-6)  # standardised on the training part
    assert len(x_test) == pytest.approx(0.3 * (len(x) + len(x_test)), abs=1)
    again = bench.pu_rows(table, 1)
    assert np.array_equal(again[1], s) and np.array_equal(again[0], x)


@pytest.mark.parametrize("table", ["housing", "autompg"])
def test_tables_of_the_packages_load_whole(bench, table):
    x, y = bench.TABLES[table].load()
    assert np.isfinite(x).all() and len(x) > 300 and 0.4 < y.mean() < 0.6


def test_choose_tables_hold_a_validation_part_an_estimate_can_read(bench):
    for table in bench.CHOOSE:
        _, s, _, _, _ = bench.pu_rows(table, 0)
        assert 0.2 * s.sum() >= 20, table


def test_the_choice_reads_only_choose_rows_validation_estimates(bench):
    frame = pd.DataFrame({
        "role": ["choose"] * 4 + ["report"] * 2,
        "method": ["a", "a", "b", "b", "a", "b"],
        "val_est_accuracy": [0.9, 0.7, 0.85, 0.84, np.nan, np.nan],
        "accuracy": [0.5, 0.5, 0.6, 0.6, 0.99, 0.1]})
    assert bench.chosen(frame) == "b"  # 0.845 > 0.80; test accuracy plays no part


@pytest.mark.parametrize("flipped, expected", [(3, "b"), (300, "a")])
def test_the_paired_choice_gives_a_tie_to_the_clearly_cheaper_candidate(
        bench, tmp_path, flipped, expected):
    """Two candidates scored on the same rows of two tables: `a` leads on the mean
    estimate; `b` costs half as much. When b disagrees with a on 3 unlabeled rows a table
    the rows cannot tell them apart and b is chosen; on 300 (a right, b wrong) a is."""
    rng = np.random.default_rng(0)
    rows = []
    for table in ("t1", "t2"):
        pu = np.r_[np.ones(200, int), np.zeros(1000, int)]
        y = np.r_[np.ones(200, int), (rng.random(1000) < 0.4).astype(int)]
        score_a = np.where(y == 1, 0.9, 0.1)
        score_b = score_a.copy()
        wrong = rng.choice(np.flatnonzero(pu == 0), flipped, replace=False)
        score_b[wrong] = 1.0 - score_b[wrong]
        for method, score, seconds in (("a", score_a, 60.0), ("b", score_b, 30.0)):
            path = tmp_path / f"{table}_{method}.csv"
            pd.DataFrame({"index": np.arange(1200), "pu": pu, "in_u": np.ones(1200, bool),
                          "score": score}).to_csv(path, index=False)
            rows.append({"table": table, "seed": 0, "role": "choose", "method": method,
                         "val_est_accuracy": 0.90 if method == "a" else 0.89,
                         "accuracy": 0.5, "seconds": seconds, "prior": 0.5,
                         "scores": str(path)})
    frame = pd.DataFrame(rows)
    assert bench.chosen(frame) == "a"  # the highest mean alone
    assert bench.chosen(frame, bench.read_scores) == expected
    # b's prior estimated 0.1 higher: both are read at the midpoint, and since the two
    # find the labelled positives alike (equal TPR) the prior moves nothing: same choice
    frame.loc[frame.method == "b", "prior"] = 0.6
    assert bench.chosen(frame, bench.read_scores) == expected
    # a table whose rows differ cannot be paired: ranked by the mean estimate, as before
    for path in frame.loc[frame.method == "b", "scores"]:
        pd.read_csv(path).assign(index=lambda t: t["index"] + 1).to_csv(path, index=False)
    assert bench.chosen(frame, bench.read_scores) == "a"


def test_scale_slopes_read_the_power_of_the_rows():
    scale = importlib.import_module("benchmarks.tabular_scale")
    rows = np.array([1e4, 1e5, 1e6])
    frame = pd.DataFrame({"rows": np.r_[rows, rows], "step": ["a"] * 3 + ["b"] * 3,
                          "seconds": np.r_[2e-3 * rows, 1e-6 * rows ** 2]})
    found = scale.slopes(frame).set_index(["step", "to_rows"]).slope
    assert found.loc["a"].tolist() == [1.0, 1.0] and found.loc["b"].tolist() == [2.0, 2.0]


def test_a_candidate_is_the_defaults_only_when_it_builds_the_same_model(bench):
    # the defaults' report row reuses the chosen candidate's fit only when both resolve
    # to one recipe; a candidate one setting away is fit on its own
    defaults = {"epochs": "auto", "finetune_epochs": "auto"}
    assert bench.same_recipe(defaults, {}, "breast_cancer", 0)
    # the eleventh round's choice is today's defaults on a table of its benchmark; the
    # tenth's (100 epochs) and the seventh's (PUCL's loss) no longer are
    assert bench.same_recipe(bench.CANDIDATES["mask50+dist_pu_ft60+pt100+wd5e-3+sscl+pt200"],
                             {}, "synthetic_0.6_202", 3)
    assert not bench.same_recipe(bench.CANDIDATES["mask50+dist_pu_ft60+pt100+wd5e-3+sscl"], {},
                                 "synthetic_0.6_202", 3)
    assert not bench.same_recipe(bench.CANDIDATES["mask50+dist_pu_ft60+pt100+wd5e-3"], {},
                                 "synthetic_0.6_202", 3)
    assert not bench.same_recipe({"finetune_epochs": 7}, {}, "breast_cancer", 0)
    assert not bench.same_recipe({}, {"epochs": 3}, "breast_cancer", 0)


def test_the_defaults_row_is_keyed_by_the_recipe_it_builds(bench, monkeypatch):
    # one key per resolved recipe: the same on every seed of a table, another when a
    # default changes, so a row kept from older defaults is neither reused nor averaged
    # with today's
    key = bench.defaults_key("breast_cancer", 0)
    assert key == bench.defaults_key("breast_cancer", 1)
    real = bench.resolved_recipe
    monkeypatch.setattr(bench, "resolved_recipe", lambda params, table, seed: real(
        {**params, "finetune_epochs": 7}, table, seed))
    assert bench.defaults_key("breast_cancer", 0) != key


def test_the_summary_keeps_each_generation_of_defaults_apart(bench):
    rows = [("pucl_defaults", "{}", 0.90), ("pucl_defaults", "{}", 0.92),
            ("pucl_defaults", '{"recipe": "abc"}', 0.80),
            ("nnpu_mlp", '{"prior": 0.61}', 0.70), ("nnpu_mlp", '{"prior": 0.63}', 0.72)]
    frame = pd.DataFrame([{"table": "t", "seed": i, "role": "report", "method": m,
                           "prior_source": "estimated", "settings": s, "accuracy": a,
                           "seconds": 1.0, "prior": 0.6, "true_prior": 0.6, "commit": "c"}
                          for i, (m, s, a) in enumerate(rows)])
    out = bench.summary(frame).set_index(["method", "defaults"])
    assert out.loc[("pucl_defaults", "unkeyed"), "mean"] == pytest.approx(0.91)
    assert out.loc[("pucl_defaults", "abc"), "n_seeds"] == 1
    # a peer's rows differ in their prior's settings and still make one line
    assert out.loc[("nnpu_mlp", ""), "mean"] == pytest.approx(0.71)


def test_prior_tables_records_each_estimate_against_the_tables_true_prior(bench, tmp_path):
    """benchmarks/prior_tables.py: each row's error is its estimate minus the share of
    positives among the table's training rows (read here from the split itself), seeds
    0-2 choose and later seeds report, the summary is the mean of those rows, a rerun fits
    nothing again, and a misspelt estimator writes nothing."""
    prior_tables = importlib.import_module("prior_tables")
    out = tmp_path / "priors.csv"
    prior_tables.main(["--estimators", "bbe", "--seeds", "0", "3", "--tables", "autompg",
                       "--out", str(out)])
    rows = pd.read_csv(out)
    for seed, role in ((0, "choose"), (3, "report")):
        row = rows[rows.seed == seed].iloc[0]
        _, _, y, _, _ = bench.pu_rows("autompg", seed)
        assert row.role == role
        assert row.true_prior == pytest.approx(y.mean(), abs=1e-4)
        assert row.error == pytest.approx(row.prior - row.true_prior, abs=2e-4)
    summary = pd.read_csv(out.with_name("priors_summary.csv")).set_index("role")
    for role in ("choose", "report"):
        assert summary.loc[role, "mean_abs_error"] == pytest.approx(
            rows[rows.role == role].error.abs().mean(), abs=1e-4)
    prior_tables.main(["--estimators", "bbe", "--seeds", "0", "3", "--tables", "autompg",
                       "--out", str(out)])
    pd.testing.assert_frame_equal(pd.read_csv(out), rows)  # resumed: the same fits
    with pytest.raises(ParamsError, match="unknown prior estimator 'bxe'"):
        prior_tables.main(["--estimators", "bxe", "--out", str(tmp_path / "none.csv")])
    assert not (tmp_path / "none.csv").exists()


def test_paired_with_peers_pairs_each_seed_and_keeps_a_rerun_once(bench):
    """The paired table against a hand count: each seed's difference, the latest row of a
    fit recorded twice, and a seed the peer lacks left out."""
    rows = [("t", 0, "pucl:x", 0.90), ("t", 0, "nnpu_mlp", 0.88), ("t", 1, "pucl:x", 0.80),
            ("t", 1, "nnpu_mlp", 0.70), ("t", 1, "nnpu_mlp", 0.84), ("t", 2, "pucl:x", 0.5)]
    frame = pd.DataFrame(rows, columns=["table", "seed", "method", "accuracy"]).assign(
        role="report", prior_source="estimated")
    out = bench.paired_with_peers(frame, "pucl:x", [0, 1, 2]).set_index("peer")
    diffs = np.array([0.90 - 0.88, 0.80 - 0.84]) * 100  # seed 1's rerun (0.84) counts
    assert out.loc["nnpu_mlp", "n_seeds"] == 2
    assert out.loc["nnpu_mlp", "difference"] == pytest.approx(diffs.mean(), abs=0.01)
    assert out.loc["nnpu_mlp", "standard_error"] == pytest.approx(
        diffs.std(ddof=1) / np.sqrt(2), abs=0.01)
    assert "bagging_pu" not in out.index  # no rows of it


def test_each_cut_rule_against_a_brute_force_over_the_cuts(bench):
    """tabular_cuts' sorted-search rates against a loop over every cut, on tied scores
    (`bench` puts benchmarks/ on the path)."""
    cuts_module = importlib.import_module("tabular_cuts")
    rng = np.random.default_rng(3)
    truth = (rng.random(300) < 0.4).astype(int)
    u = np.round(rng.normal(truth * 1.5, 1.0), 1)  # rounded: many ties
    p = np.round(rng.normal(1.5, 1.0, size=80), 1)
    prior = 0.45
    got = cuts_module.cut_accuracies(u, truth, p, prior)
    cuts = np.unique(np.concatenate([u, p]))
    tpr = np.array([(p >= c).mean() for c in cuts])
    rate = np.array([(u >= c).mean() for c in cuts])
    accuracy = np.array([((u >= c) == (truth == 1)).mean() for c in cuts])
    with np.errstate(divide="ignore", invalid="ignore"):
        lee_liu = np.where(rate > 0, tpr ** 2 / rate, 0)
    assert got["lee_liu"] == accuracy[np.argmax(lee_liu)]
    # the label-free accuracy on U: pi TPR + (1 - pi)(1 - FPR), FPR = (r - pi TPR) / (1 - pi)
    # kept within [0, 1]
    fpr = np.minimum(np.maximum((rate - prior * tpr) / (1 - prior), 0), 1)
    assert got["label_free"] == accuracy[np.argmax(prior * tpr + (1 - prior) * (1 - fpr))]
    assert got["oracle"] == accuracy.max()
    assert got["half"] == ((u >= 0.5) == (truth == 1)).mean()
    assert got["oracle"] >= max(got["half"], got["lee_liu"], got["label_free"])


def test_merge_appends_only_the_fits_the_runs_file_lacks(bench, tmp_path):
    """Two processes each fit some seeds into their own copy of runs.csv: merging one into
    the other adds the fits it lacks, once, and keeps its own row where both hold a fit."""
    def row(seed, accuracy, settings='{"a": 1}'):
        return {"table": "digits", "seed": seed, "role": "report", "method": "pucl:x",
                "prior_source": "estimated", "settings": settings, "accuracy": accuracy,
                "commit": "0123456789ab"}

    mine, theirs = tmp_path / "runs.csv", tmp_path / "other.csv"
    pd.DataFrame([row(3, 0.90), row(4, 0.91)]).to_csv(mine, index=False)
    # the other copy started from the same file, then fitted seed 5 twice (a rerun: its
    # last row counts) and a new setting; rows with a gap are no fits, and make its seed
    # column read as floats
    pd.DataFrame([row(3, 0.50), row(4, 0.91), row(5, 0.80), row(5, 0.92),
                  row(3, 0.93, '{"a": 2}'), {**row(4, 0.91), "method": None},
                  {"table": "digits", "seed": None}]).to_csv(theirs, index=False)
    rows = bench.Rows(mine)
    assert rows.merge(bench.read_runs(theirs)) == 2
    assert rows.merge(bench.read_runs(theirs)) == 0
    merged = pd.read_csv(mine, dtype={"commit": str})
    assert merged.seed.tolist() == [3, 4, 5, 3]  # integers still: no 3.0 next to 3
    assert merged.loc[(merged.seed == 3) & (merged.settings == '{"a": 1}'),
                      "accuracy"].tolist() == [0.90]  # its own row, not the other's 0.50
    assert rows.done({"seed": 5, "method": "pucl:x"})["accuracy"] == 0.92  # found again
    assert merged.commit.tolist()[2] == "0123456789ab"  # text, its leading zero kept
    with pytest.raises(ValueError, match=r"not a runs file: it lacks the columns \['role'"):
        pd.DataFrame([{"table": "digits", "seed": 3}]).to_csv(tmp_path / "s.csv", index=False)
        bench.read_runs(tmp_path / "s.csv")


def test_merge_refuses_a_missing_file_in_one_line(bench, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--merge", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "r.csv")])
    assert exit_.value.code == 2
    assert f"--merge: {tmp_path / 'nope.csv'} is not a file" in capsys.readouterr().err
    assert not (tmp_path / "r.csv").exists()


def test_merge_changes_nothing_when_any_file_is_no_runs_file(bench, tmp_path, capsys):
    """The files are all checked first: a good one is not merged before a bad one fails."""
    out, good, bad = tmp_path / "r.csv", tmp_path / "good.csv", tmp_path / "bad.csv"
    key = {"table": "digits", "role": "report", "method": "m", "prior_source": "estimated",
           "settings": "{}", "accuracy": 0.9}
    pd.DataFrame([{**key, "seed": 3}]).to_csv(out, index=False)
    pd.DataFrame([{**key, "seed": 4}]).to_csv(good, index=False)
    pd.DataFrame([{"table": "digits", "seed": 5}]).to_csv(bad, index=False)
    before = out.read_bytes()
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--merge", str(good), str(bad), "--out", str(out)])
    assert exit_.value.code == 2
    assert f"--merge: {bad} is not a runs file" in capsys.readouterr().err
    assert out.read_bytes() == before
