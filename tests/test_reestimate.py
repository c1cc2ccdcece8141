"""The prior re-estimated after pretraining (prior.reestimate): positives held out of
pretraining's labels, the stage that scores them on the encoder's features, and the
stages after it using that estimate."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pucl.config import parse_params
from pucl.data.split import pretrain_holdout
from pucl.errors import ParamsError
from pucl.reporting import prior_source
from pucl.stages.pretrain import pretrain_labels
from tests.conftest import make_project, tiny_params
from tests.helpers import stage


def test_holdout_is_a_seeded_share_of_the_positives_whatever_their_order():
    positives = np.arange(1000, 2000, 3)  # 334 rows
    held = pretrain_holdout(positives, 0.2, seed=5)
    assert len(held) == round(0.2 * 334) and set(held) <= set(positives)
    assert np.array_equal(held, np.sort(held))
    assert np.array_equal(pretrain_holdout(positives[::-1].copy(), 0.2, seed=5), held)
    assert not np.array_equal(pretrain_holdout(positives, 0.2, seed=6), held)
    assert len(pretrain_holdout(positives, 0.0, seed=5)) == 0
    assert len(pretrain_holdout(np.array([7, 9]), 0.01, seed=0)) == 1  # at least one
    assert len(pretrain_holdout(np.array([7, 9]), 0.99, seed=0)) == 1  # never all of them
    with pytest.raises(ValueError, match=r"share must be in \[0, 1\), got 1.0"):
        pretrain_holdout(positives, 1.0, seed=0)


def test_pretraining_sees_the_held_out_positives_as_unlabeled():
    train = pd.DataFrame({"index": np.arange(100), "pu": [1] * 40 + [0] * 60})
    labels = pretrain_labels(train, 0.25, seed=3)
    held = pretrain_holdout(np.arange(40), 0.25, seed=3)
    assert labels.sum() == 30 and not labels[held].any() and not labels[40:].any()
    assert pretrain_labels(train, 0.0, seed=3).sum() == 40


def test_reestimate_needs_held_out_positives():
    with pytest.raises(ParamsError, match="prior.reestimate 'auto' needs "
                                          r"pretrain.holdout_positives in \(0, 1\)"):
        parse_params({"prior": {"reestimate": "auto"}})
    parse_params({"prior": {"reestimate": "auto"}, "pretrain": {"holdout_positives": 0.2}})


def test_unknown_reestimate_names_the_estimators():
    from pucl.stages.preflight import check_methods

    params = parse_params({"prior": {"reestimate": "pen"},
                           "pretrain": {"holdout_positives": 0.2}})
    with pytest.raises(ParamsError, match="invalid parameter 'prior.reestimate' = 'pen'.*auto"):
        check_methods(params)


def test_report_names_the_re_estimate_as_the_prior_source():
    base = {"prior.method": "auto", "pretrain.prior": "estimate",
            "classifier.prior": "estimate"}
    assert prior_source({**base, "prior.reestimate": "none"}) == "auto"
    assert prior_source({**base, "prior.reestimate": "bbe"}) == "bbe@features"
    assert prior_source({**base, "prior.reestimate": "bbe", "classifier.prior": "oracle"}) \
        == "oracle"
    assert prior_source({**base, "prior.reestimate": "bbe", "classifier.prior": "0.4"}) \
        == "given"


def test_stages_after_pretraining_use_the_re_estimate(tmp_path, tracking_uri, monkeypatch):
    params = tiny_params(prior={"reestimate": "bbe"}, pretrain={"holdout_positives": 0.2},
                         classifier={"objective": "nnpu", "epochs": 2})
    project = make_project(tmp_path / "proj", params)
    monkeypatch.setenv("PUCL_ROOT", str(project))
    for name in ("build_split", "estimate_prior", "pretrain", "reestimate_prior",
                 "pupl_label", "train_classifier", "evaluate"):
        stage(project, name)
    first = json.loads((project / "data/prior/prior.json").read_text())
    final = json.loads((project / "data/prior/reestimate.json").read_text())
    assert final["source"] == "bbe@features" and final["method"] == "bbe"
    assert final["n_p_heldout"] == 40 and final["heldout_n_p"] == 40  # 20% of n_p = 200
    assert final["heldout_classifier"] == "logistic"  # feature vectors, not images
    assert final["prior_first"] == first["prior"] and 0.0 < final["prior"] < 1.0
    assert final["prior"] != first["prior"]
    assert final["abs_error"] == abs(final["prior"] - first["prior_true"])
    classifier = json.loads((project / "data/classifier/summary.json").read_text())
    assert (classifier["prior"], classifier["prior_source"]) == (final["prior"], "bbe@features")
    metrics = json.loads((project / "data/evaluate/metrics.json").read_text())
    assert metrics["prior_estimate"] == final["prior"]
    assert metrics["prior_first_estimate"] == first["prior"]


def test_too_few_held_out_positives_is_refused_in_one_line(tmp_path, tracking_uri,
                                                             monkeypatch):
    params = tiny_params(prior={"reestimate": "bbe"}, pretrain={"holdout_positives": 0.02})
    project = make_project(tmp_path / "proj", params)
    monkeypatch.setenv("PUCL_ROOT", str(project))
    for name in ("build_split", "estimate_prior", "pretrain"):
        stage(project, name)
    result = stage(project, "reestimate_prior", check=False)
    assert result.returncode != 0
    line = result.stderr.strip().splitlines()[-1]
    assert "prior.reestimate 'bbe' on the 4 held-out positives" in line
    assert "pretrain.holdout_positives = 0.02" in line and "at least" in line
    assert not (project / "data/prior/reestimate.json").exists()
