"""Every registry, parametrised over its entries: a new method is tested here with no new
test code. Expectations are independent of the implementation: known mixture proportions,
labelled positives that must stay positive, the registry's own listing."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import pucl
from pucl.classify.objectives import CLASSIFIER_OBJECTIVES, ClassifierObjective
from pucl.errors import ParamsError
from pucl.losses import CONTRASTIVE_LOSSES
from pucl.models import ENCODERS
from pucl.pretraining import PRETRAINING_METHODS, PretrainJob
from pucl.prior import PRIOR_ESTIMATORS
from pucl.pupl import PSEUDO_LABELLERS
from pucl.registry import EntryParams, Registry

REGISTRIES = (PRIOR_ESTIMATORS, PRETRAINING_METHODS, ENCODERS, CONTRASTIVE_LOSSES,
              PSEUDO_LABELLERS, CLASSIFIER_OBJECTIVES)


def gaussian_mixture(prior: float, n_u: int = 600, n_p: int = 300, seed: int = 0):
    """U = prior x N(+1.5, I) + (1 - prior) x N(-1.5, I) in 5 dimensions; P ~ N(+1.5, I)."""
    rng = np.random.default_rng(seed)
    n_pos = int(round(prior * n_u))
    unlabeled = np.concatenate([rng.normal(1.5, 1.0, (n_pos, 5)),
                                rng.normal(-1.5, 1.0, (n_u - n_pos, 5))])
    return unlabeled, rng.normal(1.5, 1.0, (n_p, 5))


# -- the registry itself -----------------------------------------------------------------

def test_lookup_lists_and_refuses_unknown_names_with_a_suggestion():
    registry = Registry("widget", "pucl.registry")  # a module, not a package: nothing to load
    registry._loaded = True

    @registry.register("round_one")
    def round_one():
        """Round things."""

    @registry.register("square")
    class Square:
        pass

    assert registry.names() == ["round_one", "square"] and list(registry) == registry.names()
    assert registry.names("sq*") == ["square"] and "square" in registry
    assert registry.get("round_one").summary == "Round things."
    with pytest.raises(ParamsError, match=r"unknown widget 'squre'; did you mean 'square'\? "
                                          r"\(allowed: round_one, square\)"):
        registry.get("squre")
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("square")(round_one)


def test_build_passes_each_entry_only_what_its_signature_names():
    registry = Registry("widget", "pucl.registry")
    registry._loaded = True

    class Settings(EntryParams):
        size: int = 3
        shared_only_by_others: float = 0.5

    @registry.register("box", params=Settings, params_key="shape")
    class Box:
        def __init__(self, size: int = 1, random_state: int = 0):
            self.size, self.random_state = size, random_state

    entry = registry.get("box")
    box = entry.build(entry.settings({"size": 7}, "section.shape"), random_state=4, prior=0.2)
    assert (box.size, box.random_state) == (7, 4)
    assert entry.accepts("random_state") and not entry.accepts("prior")
    with pytest.raises(ParamsError, match=r"unknown parameter 'section.shape.sise'; did you "
                                          r"mean 'section.shape.size'\?"):
        entry.settings({"sise": 1}, "section.shape")


def test_every_registry_lists_the_methods_named_in_params_yaml_comments():
    methods = pucl.list_methods()
    assert methods["prior estimator"] == ["bbe", "dedpul", "km1", "km2", "tedn", "tice"]
    assert methods["pseudo-labeller"] == ["auto", "prior_rank", "pu_kmeans"]
    assert methods["pretraining method"] == ["contrastive", "ncpu", "ssc"]
    assert set(methods["classifier objective"]) == {"pupl_ce", "nnpu", "upu", "dist_pu",
                                                    "dist_pu_pairs", "naive_ce",
                                                    "method_head"}
    assert {"pucl", "punce", "sscl"} <= set(methods["contrastive loss"])
    assert CONTRASTIVE_LOSSES.names(tag="needs_prior") == ["dcl", "punce"]


def test_import_pucl_loads_no_method_code():
    """A stage importing one module of pucl must not pull in all of it (dvc.yaml deps)."""
    code = ("import sys, pucl; "
            "print(sorted(m for m in sys.modules if m.startswith(('pucl.', 'torch'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("registry", REGISTRIES, ids=lambda r: r.kind)
def test_every_entry_documents_itself_and_validates_its_default_settings(registry):
    for entry in registry.entries():
        assert entry.summary, f"{registry.kind} {entry.name} has no docstring"
        if entry.params is not None:
            assert entry.settings({}, f"x.{entry.params_key}") == entry.params()


# -- prior estimators --------------------------------------------------------------------

@pytest.mark.parametrize("name", PRIOR_ESTIMATORS.names())
@pytest.mark.parametrize("prior", [0.3, 0.7])
def test_prior_estimators_recover_a_known_mixture_proportion(name, prior):
    from pucl.prior.heldout import HeldOutEstimator
    from pucl.prior.tice import TIcE

    estimator = PRIOR_ESTIMATORS.create(name, random_state=0)
    # held-out estimators see half of each side per fold model: 150 positives a fold are
    # too few for a top bin (BBE: 0.49 on one fold at 0.7), so they get more rows; so does
    # TIcE, whose bound on half the rows is too loose there (0.86 at 0.7)
    sizes = (2000, 600) if isinstance(estimator, HeldOutEstimator | TIcE) else (600, 300)
    unlabeled, positive = gaussian_mixture(prior, *sizes)
    assert estimator.fit(unlabeled, positive) is estimator
    # a loose bar every estimator must clear (KM1 / KM2 underestimate: 0.22 and 0.62 here)
    assert abs(estimator.prior_ - prior) < 0.1, (name, prior, estimator.prior_)
    assert estimator.n_features_in_ == 5


@pytest.mark.parametrize("name", PRIOR_ESTIMATORS.names())
def test_prior_estimators_refuse_mismatched_or_tiny_inputs(name):
    from sklearn.exceptions import NotFittedError

    estimator = PRIOR_ESTIMATORS.create(name)
    with pytest.raises(NotFittedError):
        _ = estimator.prior
    unlabeled, positive = gaussian_mixture(0.5, n_u=40, n_p=20)
    with pytest.raises(ValueError, match="5 features per sample but X_positive has 4"):
        estimator.fit(unlabeled, positive[:, :4])
    with pytest.raises(ValueError, match=r"at least \d+ samples per side( \(.+\))?, got 40 "
                                          r"unlabeled and 1 positive"):
        estimator.fit(unlabeled, positive[:1])
    with pytest.raises(ValueError, match="NaN"):
        estimator.fit(np.full((10, 5), np.nan), positive)


@pytest.mark.parametrize("name", PRIOR_ESTIMATORS.names())
def test_prior_estimators_are_deterministic_for_a_seed(name):
    unlabeled, positive = gaussian_mixture(0.4, n_u=1000, n_p=1000)
    entry = PRIOR_ESTIMATORS.get(name)
    # estimator-specific settings go only to the estimators that take them
    first = entry.build(None, max_per_side=300, random_state=3).fit(unlabeled, positive)
    again = entry.build(None, max_per_side=300, random_state=3).fit(unlabeled, positive)
    assert first.prior_ == again.prior_


@pytest.mark.parametrize("name", ["km1", "km2"])
def test_kernel_mean_subsamples_by_the_seed(name):
    unlabeled, positive = gaussian_mixture(0.4, n_u=1000, n_p=1000)  # 300 of 1,000 a side
    first = PRIOR_ESTIMATORS.create(name, max_per_side=300, random_state=3)
    other = PRIOR_ESTIMATORS.create(name, max_per_side=300, random_state=4)
    assert first.fit(unlabeled, positive).prior_ != other.fit(unlabeled, positive).prior_


# -- pseudo-labellers --------------------------------------------------------------------

@pytest.mark.parametrize("name", PSEUDO_LABELLERS.names())
def test_pseudo_labellers_keep_labelled_positives_and_find_two_blobs(name):
    rng = np.random.default_rng(0)
    y = (rng.random(2000) < 0.4).astype(np.int64)
    z = (rng.normal(size=(2000, 8)) + 4.0 * y[:, None]).astype(np.float32)
    s = (y == 1) & (rng.random(2000) < 0.3)
    labeller = PSEUDO_LABELLERS.get(name).build(prior=float(y[~s].mean()), restarts=3,
                                                random_state=0)
    labels = labeller.fit_predict(z, s.astype(int))
    assert set(np.unique(labels)) <= {0, 1} and labels.shape == (2000,)
    assert labels[s].all(), "a labelled positive lost its label"
    assert (labels == y).mean() > 0.98
    assert np.isinf(labeller.margin_[s]).all() and labeller.method_ in PSEUDO_LABELLERS


@pytest.mark.parametrize("name", PSEUDO_LABELLERS.names())
def test_pseudo_labellers_refuse_labels_other_than_0_and_1(name):
    labeller = PSEUDO_LABELLERS.get(name).build(prior=0.5)
    with pytest.raises(ValueError, match=r"got values \[0, 1, 2\]"):
        labeller.fit(np.zeros((3, 2)), [0, 1, 2])
    with pytest.raises(ValueError, match="one PU label per row of X \\(3\\)"):
        labeller.fit(np.zeros((3, 2)), [0, 1])


# -- classifier objectives and pretraining methods ---------------------------------------

@pytest.mark.parametrize("name", CLASSIFIER_OBJECTIVES.names())
def test_classifier_objectives_say_what_they_need(name):
    objective = CLASSIFIER_OBJECTIVES.create(name)
    assert isinstance(objective, ClassifierObjective)
    assert objective.needs_prior == (name in ("nnpu", "upu", "dist_pu", "dist_pu_pairs"))
    assert objective.reads_pseudo_labels == (name == "pupl_ce")
    assert objective.trains == (name != "method_head")


@pytest.mark.parametrize("name", PRETRAINING_METHODS.names())
def test_every_pretraining_method_trains_one_epoch_in_place(name):
    from pucl.data.augment import AffineJitter
    from pucl.losses import make_loss
    from pucl.models import ContrastiveModel
    from pucl.runtime.device import seeded_generator

    torch.manual_seed(0)
    model = ContrastiveModel("lenet5", (1, 28, 28), 32, 16)
    before = [p.detach().clone() for p in model.encoder.parameters()]
    images = torch.randint(0, 256, (64, 1, 28, 28), dtype=torch.uint8)
    labeled = torch.arange(64) < 16
    trainer = PRETRAINING_METHODS.get(name).build()
    job = PretrainJob(model, make_loss("pucl"), images, labeled, AffineJitter(), 1, 32, 1e-3,
                      0.0, 16, 32, 0.4 if trainer.uses_prior("pucl") else None,
                      seeded_generator(0), torch.device("cpu"), progress=False)
    result = trainer.train(job)
    assert len(result.history) == 1 and np.isfinite(result.history[0].loss)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.encoder.parameters(),
                                                     strict=True))
    assert (result.classifier is None) == (name == "contrastive")


@pytest.mark.parametrize("name", ENCODERS.names())
def test_every_encoder_maps_a_batch_to_out_dim_features_that_depend_on_each_image(name):
    shape = (1, 28, 28) if name.startswith("lenet5") or name == "mlp" else (3, 32, 32)
    torch.manual_seed(0)
    encoder = ENCODERS.create(name, in_shape=shape).eval()
    x = torch.rand(3, *shape)
    with torch.no_grad():
        h = encoder(x)
        changed = encoder(torch.cat([x[:1], 1.0 - x[1:2], x[2:]]))
    assert h.shape == (3, encoder.out_dim) and torch.isfinite(h).all()
    def moved(row: int) -> float:  # relative: untrained encoders give tiny features
        return float((changed[row] - h[row]).norm() / h[row].norm())

    # eval mode: each row is a function of its own image only
    assert moved(0) < 1e-4 and moved(2) < 1e-4
    assert moved(1) > 1e-2


def test_pucl_methods_lists_every_registered_name_with_its_settings_section():
    """In this process (a command's own start is test_cli's)."""
    from typer.testing import CliRunner

    from pucl.cli import app

    shown = CliRunner().invoke(app, ["methods"])
    assert shown.exit_code == 0, shown.stderr
    for names in pucl.list_methods().values():
        for name in names:
            assert name in shown.stdout
    # where km1/km2 and pu_kmeans/auto read their settings
    assert "km" in shown.stdout and "kmeans" in shown.stdout
    only = CliRunner().invoke(app, ["methods", "km*"]).stdout  # a pattern
    assert "km2" in only and "pu_kmeans" not in only and "contrastive loss" not in only
