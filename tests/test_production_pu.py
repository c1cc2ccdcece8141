"""The production cycle with no labels anywhere (docs/production.md): a tracked dataset
made from `x` and `pu` alone freezes a PU holdout with its prior estimate, and retraining
decides by the label-free estimate on it. Checked against a naive estimate written here
from the formula, and against the hidden labels the test kept aside."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from pucl.data import load_dataset
from tests.conftest import make_project, new_store, python_path, tiny_params

pytestmark = pytest.mark.filterwarnings("ignore")

MODEL = "pucl-classifier"


def pucl(*args: str, code: int = 0):
    from pucl.cli import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, (args, result.output, result.stderr, result.exception)
    return result


def retrain_tags(client: MlflowClient) -> dict[str, str]:
    exp = client.get_experiment_by_name("pucl")
    run = client.search_runs([exp.experiment_id], "tags.kind = 'retrain'", max_results=1,
                             order_by=["attributes.start_time DESC"])[0]
    return dict(run.data.tags)


def data_run(client: MlflowClient, batch: str):
    exp = client.get_experiment_by_name("pucl")
    found = [r for r in client.search_runs([exp.experiment_id], "tags.kind = 'data'")
             if r.data.tags.get("data.batch") == batch]
    assert len(found) == 1, batch
    return found[0]


def pu_digits(n_labelled: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, pu): 2,000 MNIST-5k digits (y: even), `n_labelled` even ones labelled."""
    data = load_dataset("mnist5k", test_fraction=0.2, seed=0)
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(data.y_train), 2000, replace=False)
    x, y = data.x_train[rows], (data.y_train[rows] % 2 == 0).astype(np.int64)
    pu = np.zeros(len(x), np.int64)
    pu[rng.choice(np.flatnonzero(y == 1), n_labelled, replace=False)] = 1
    return x, y, pu


def naive_estimate(scores: np.ndarray, pu: np.ndarray, prior: float) -> float:
    """Accuracy on U's distribution = 1 - pi - r + 2 pi TPR (U: every row, case_control)."""
    tpr = float((scores[pu == 1] >= 0.5).mean())
    r = float((scores >= 0.5).mean())
    return 1 - prior - r + 2 * prior * tpr


def test_a_cycle_with_p_and_u_alone(tmp_path, harness):
    import mlflow.pyfunc

    uri = new_store(tmp_path / "mlflow.db")
    # three restarts: the tests' logistic TED^n on 1,500 rows errs by 0.12 alone, 0.08 so
    params = tiny_params(data={"dataset": "tracked", "task": "given"},
                         prior={"heldout": {"restarts": 3}})
    # P and U alone: 2,000 digits, 400 even ones labelled; the labels stay in this test
    x, y, pu = pu_digits(400, seed=0)
    with pytest.MonkeyPatch.context() as mp:
        root = make_project(tmp_path / "proj", params)
        np.savez(root / "pu.npz", x=x, pu=pu)
        for key, value in (("PUCL_ROOT", str(root)), ("MLFLOW_TRACKING_URI", uri),
                           ("PATH", python_path()), ("PUCL_TRACKING", "on")):
            mp.setenv(key, value)
        mp.chdir(root)
        client = MlflowClient(uri)

        result = pucl("data", "init", "pu.npz", "--rows", "1500", "--rest", "arriving.npz")
        holdout = np.load(root / "data/dataset/holdout.npz")
        # 10% of the 400 labelled and of the 1,600 others, the prior frozen beside them
        assert sorted(holdout.files) == ["prior", "prior_halfwidth", "pu_test", "x_test",
                                         "y_test"]
        halfwidth = float(holdout["prior_halfwidth"])  # TED^n's bootstrap and restarts
        assert 0 < halfwidth < 0.3
        assert (holdout["pu_test"].sum(), len(holdout["pu_test"])) == (40, 200)
        assert (holdout["y_test"][holdout["pu_test"] == 0] == -1).all()  # nothing known
        prior = float(holdout["prior"])
        assert abs(prior - y.mean()) < 0.1 and "PU: 40 labelled positive" in result.output
        # what a holdout of this size can tell (case_control: U is all 200 rows), with the
        # prior's part that retrain's intervals carry: its own half-width or the stated
        # evaluate.prior_error, the wider
        from pucl.evaluation.label_free import accuracy_halfwidth

        allowed = max(halfwidth, 0.03)
        rows = accuracy_halfwidth(40, 200, prior)
        width = (rows ** 2 + (0.8 * allowed) ** 2) ** 0.5  # 2 TPR - 1 at TPR 0.9
        assert (f"40 labelled positives and 200 unlabeled rows estimate a model's accuracy "
                f"within about +-{width:.3f} (95%, for a model right on 90% of each class: "
                f"+-{rows:.3f} from the rows, with the prior known to +-{allowed:.3f})"
                ) in " ".join(result.output.split())

        pucl("retrain", "--no-progress")
        first = retrain_tags(client)
        assert first["retrain.decision"] == "promoted"
        assert first["retrain.score_kind"] == "estimated"
        assert first["holdout.prior"] == f"{prior:.4f}"
        assert first["holdout.prior_halfwidth"] == f"{halfwidth:.4f}"
        served = mlflow.pyfunc.load_model(f"models:/{MODEL}@champion")
        scores = served.predict(holdout["x_test"].astype(np.float32) / 255)
        naive = naive_estimate(scores, holdout["pu_test"], prior)
        assert float(first["retrain.challenger_score"]) == pytest.approx(naive, abs=1e-9)
        assert float(first["holdout.estimated_accuracy"]) == pytest.approx(naive, abs=1e-4)
        # the hidden labels of the holdout rows: the estimate is near what they say (200
        # rows, 40 of them P, a 2-epoch model: TPR alone has a standard error near 0.08)
        hidden = y[[int(np.flatnonzero((x == row).all(axis=(1, 2, 3)))[0])
                    for row in holdout["x_test"]]]
        truth = float(((scores >= 0.5) == hidden).mean())
        assert abs(naive - truth) < 0.2, (naive, truth)

        pucl("retrain", "--no-progress")
        assert retrain_tags(client)["retrain.decision"] == "skipped"

        # the frozen prior estimated again, only when asked: with init's params, the same
        # first batch and seed give the same prior; with another method only it moves
        pucl("data", "reestimate-prior")
        assert float(np.load(root / "data/dataset/holdout.npz")["prior"]) == prior
        pucl("data", "reestimate-prior", "--set", "prior.method=given",
             "--set", "prior.value=0.37")
        moved = np.load(root / "data/dataset/holdout.npz")
        assert float(moved["prior"]) == 0.37 and "prior_halfwidth" not in moved.files
        for key in ("x_test", "pu_test", "y_test"):
            assert np.array_equal(moved[key], holdout[key]), key
        exp = client.get_experiment_by_name("pucl")
        runs = client.search_runs([exp.experiment_id], "tags.`prior.method` = 'given'")
        assert runs[0].data.tags["holdout.prior_before"] == f"{prior:.6f}"
        assert runs[0].data.metrics["holdout_prior"] == 0.37
        pucl("data", "reestimate-prior")  # back: init's estimate, the version it had
        back = np.load(root / "data/dataset/holdout.npz")
        assert (float(back["prior"]), float(back["prior_halfwidth"])) == (prior, halfwidth)
        pucl("retrain", "--no-progress")
        assert retrain_tags(client)["retrain.decision"] == "skipped"

        pucl("data", "add", "arriving.npz")
        # the batch watched: its prior, and the champion's estimate on its own P and U
        watched = data_run(client, "00001").data.metrics
        assert abs(watched["monitor.prior"] - y.mean()) < 0.15
        # the batch prior's own spread (TED^n's bootstrap and restarts), which the
        # interval below covers where it is wider than evaluate.prior_error
        assert 0 < watched["monitor.prior_halfwidth"] < 0.3
        assert watched["monitor.reference_accuracy"] == pytest.approx(naive, abs=1e-4)
        assert watched["monitor.estimated_accuracy_low"] <= watched[
            "monitor.estimated_accuracy"] <= watched["monitor.estimated_accuracy_high"]
        pucl("retrain", "--no-progress")
        third = retrain_tags(client)
        # promoted only when the paired difference's whole interval clears the margin, 0
        low, diff, high = (float(third[f"retrain.difference{end}"])
                           for end in ("_low", "", "_high"))
        assert low <= diff <= high
        assert diff == pytest.approx(float(third["retrain.challenger_score"])
                                     - float(third["retrain.champion_score"]), abs=1e-9)
        better = low > 0
        assert third["retrain.decision"] == ("promoted" if better else "kept")
        assert "(paired, on the holdout's P and U)" in third["retrain.reason"]
        assert third["retrain.score_kind"] == "estimated"
        assert float(third["retrain.champion_score"]) == pytest.approx(naive, abs=1e-9)
        holder = third["retrain.challenger_score" if better else "retrain.champion_score"]
        assert float(third["holdout.estimated_accuracy"]) == pytest.approx(float(holder),
                                                                           abs=1e-4)
        assert (float(third["holdout.estimated_accuracy_low"])
                <= float(third["holdout.estimated_accuracy"])
                <= float(third["holdout.estimated_accuracy_high"]))

        # a batch unlike the rest (the digits inverted): the champion's estimate drops
        # below what it scored on the holdout, beyond the interval, and the run says so
        np.savez(root / "inverted.npz", x=255 - x[:400], pu=pu[:400])
        alerted = pucl("data", "add", "inverted.npz")
        tags = data_run(client, "00002").data.tags
        assert tags["monitor.alert"].startswith("batch 00002, champion v")
        assert "monitor.alert: batch 00002" in alerted.stderr

        np.savez(tmp_path / "new.npz", x=x[:20])
        pucl("predict", str(tmp_path / "new.npz"), "--out", str(tmp_path / "s.csv"),
             "--model", f"{MODEL}@champion")
        assert (tmp_path / "s.csv").read_text().count("\n") == 21


def smallest_share(n_labelled: int, n_other: int) -> float:
    """By brute force: the smallest share in hundredths whose validation part holds 20
    labelled positives and 20 members of U (case_control: U is every row)."""
    for hundredths in range(1, 51):
        f = hundredths / 100
        n_p, n_rest = round(f * n_labelled), round(f * n_other)
        if n_p >= 20 and n_p + n_rest >= 20:
            return f
    raise AssertionError("no share")


@contextlib.contextmanager
def newcomers_project(tmp_path, params: dict):
    """A project whose pu.npz holds 2,000 digits, 200 even ones labelled (P and U alone),
    its MLflow store and PUCL_ROOT set, the current directory its root."""
    x, _, pu = pu_digits(200, seed=1)
    with pytest.MonkeyPatch.context() as mp:
        root = make_project(tmp_path / "proj", params)
        np.savez(root / "pu.npz", x=x, pu=pu)
        mp.setenv("MLFLOW_TRACKING_URI", new_store(tmp_path / "mlflow.db"))
        mp.setenv("PUCL_ROOT", str(root))
        mp.chdir(root)
        yield root


def test_init_says_what_retraining_needs_and_data_use_writes_it(tmp_path):
    """A newcomer's case: 200 labelled positives, 1,500 of 2,000 rows tracked, and
    split.val_fraction set to 0.1 by hand. The 10% validation part of a retrain would
    hold out 15 of the first batch's labelled positives; init says so, and `pucl data
    use` writes what retraining needs into params.yaml, so no retrain needs a --set."""
    params = tiny_params(prior={"method": "given", "value": 0.5}, split={"val_fraction": 0.1})
    with newcomers_project(tmp_path, params) as root:
        pucl("data", "use", code=2)  # nothing tracked yet: refused, params untouched
        result = pucl("data", "init", "pu.npz", "--rows", "1500", "--rest", "arriving.npz")
        first = np.load(root / "data/dataset/batches/00000.npz")["pu"]
        n_labelled = int(first.sum())
        needed = smallest_share(n_labelled, len(first) - n_labelled)
        assert needed > 0.1
        assert (f"split.val_fraction = 0.1 leaves a retrain on these 1500 rows ({n_labelled} "
                f"labelled positive) too small a validation part") in result.stderr
        assert f"`pucl data use` sets it to {needed:g}" in result.stderr
        # before: a retrain's params are refused, as the newcomer saw
        refused = pucl("check", "--set", "data.dataset=tracked", "--set", "data.task=given",
                       code=2)
        assert "split.val_fraction = 0.1 holds out" in refused.stderr
        used = pucl("data", "use")
        assert f"params.yaml: split.val_fraction: 0.1 -> {needed:g}" in used.output
        assert "params.yaml: data.dataset: mnist5k -> tracked" in used.output
        assert "params.yaml is valid" in pucl("check").output  # no --set needed now
        assert "already trains on the tracked dataset" in pucl("data", "use").output


def test_auto_val_fraction_needs_no_advice_and_no_override(tmp_path):
    """The same data with the default split.val_fraction, auto: init warns of nothing,
    the retrain's params are valid as they are, and `pucl data use` leaves the share."""
    params = tiny_params(prior={"method": "given", "value": 0.5})
    assert params["split"]["val_fraction"] == "auto"
    with newcomers_project(tmp_path, params):
        result = pucl("data", "init", "pu.npz", "--rows", "1500", "--rest", "arriving.npz")
        assert "warning" not in result.stderr
        assert "params.yaml is valid" in pucl("check", "--set", "data.dataset=tracked",
                                             "--set", "data.task=given").output
        used = pucl("data", "use")
        assert "split.val_fraction" not in used.output
        assert "params.yaml is valid" in pucl("check").output
