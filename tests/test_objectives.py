"""Classifier objectives: the rows and labels each learns from, against a hand-made split,
and the classifier step (pucl.classify.fit) on features a linear head can separate."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pucl.classify.fit import ClassifierSettings, degenerate, fit_member
from pucl.classify.linear import LinearSettings
from pucl.classify.objectives import CLASSIFIER_OBJECTIVES, TrainingRows
from pucl.errors import DataError

# dataset rows 10..17; 11 and 14 labelled (case-control: also in U); 17 in neither
# (split.prior subsampled it away); PUPL called 11, 12, 14 positive
ROWS = TrainingRows(index=np.arange(10, 18),
                    labelled=np.array([0, 1, 0, 0, 1, 0, 0, 0], bool),
                    in_u=np.array([1, 1, 1, 1, 1, 1, 1, 0], bool),
                    pseudo_labels=np.array([0, 1, 1, 0, 1, 0, 0, 0]))


def objective(name: str):
    return CLASSIFIER_OBJECTIVES.create(name)


def test_pupl_ce_learns_every_training_row_with_its_pseudo_label():
    t = objective("pupl_ce").targets(ROWS, None)
    assert t.rows.tolist() == list(range(10, 18))
    assert t.labels.tolist() == [0, 1, 1, 0, 1, 0, 0, 0]


def test_naive_ce_takes_u_as_negative_and_skips_rows_outside_p_and_u():
    t = objective("naive_ce").targets(ROWS, None)
    assert t.rows.tolist() == list(range(10, 17))
    assert t.labels.tolist() == [0, 1, 0, 0, 1, 0, 0]


@pytest.mark.parametrize("name", ["nnpu", "upu"])
def test_pu_risks_index_the_labelled_positives_and_u_within_their_rows(name):
    t = objective(name).targets(ROWS, 0.3)
    assert t.rows.tolist() == list(range(10, 17)) and t.prior == 0.3
    assert t.rows[t.positive].tolist() == [11, 14]
    assert t.rows[t.unlabeled].tolist() == list(range(10, 17))  # case-control: P in U too
    assert t.labels.tolist() == [0, 1, 0, 0, 1, 0, 0]  # what the fit is reported against


def test_single_class_labels_and_a_missing_method_head_are_one_line_errors():
    one_class = TrainingRows(ROWS.index, ROWS.labelled, ROWS.in_u, np.ones(8, int))
    with pytest.raises(DataError, match="pupl_ce: the training labels hold a single class"):
        objective("pupl_ce").targets(one_class, None)
    with pytest.raises(DataError, match="needs PUPL's pseudo-labels"):
        objective("pupl_ce").targets(TrainingRows(ROWS.index, ROWS.labelled, ROWS.in_u), None)
    method = objective("method_head")
    with pytest.raises(DataError, match="needs pretrain.method ncpu or ssc"):
        method.fit_head(np.zeros((7, 2)), method.targets(ROWS, None), None, None, False)


class _Identity(torch.nn.Module):
    """Stands in for an encoder: the 'images' are already features."""

    out_dim = 2

    def forward(self, x):
        return x.reshape(len(x), -1)


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = _Identity()


@pytest.mark.parametrize("name", ["pupl_ce", "nnpu"])
def test_fit_member_separates_two_clusters_and_smooths_over_neighbours(name):
    rng = np.random.default_rng(0)
    y = np.repeat([1, 0], 200)
    x = (rng.normal(size=(400, 2)) + 4.0 * (2 * y[:, None] - 1)).astype(np.float32)  # cosine kNN
    rows = TrainingRows(np.arange(400), (np.arange(400) < 60), np.arange(400) >= 0, y)
    obj = objective(name)
    targets = obj.targets(rows, 0.5)
    settings = ClassifierSettings(LinearSettings(30, 0.05, 0.0, 64), neighbours=5)
    torch.manual_seed(0)
    member = fit_member(obj, _Model(), x[targets.rows], targets, settings, None,
                        torch.Generator().manual_seed(0), torch.device("cpu"))
    scores = member.head.positive_score(member.features)
    assert ((scores >= 0.5) == y[targets.rows]).mean() > 0.97
    assert member.head.k == 5 and member.encoder_state is None
    assert member.phases == ["head"] * 30 and degenerate(scores) is None
    assert degenerate(np.ones(4)) == "the classifier calls every training row positive"
