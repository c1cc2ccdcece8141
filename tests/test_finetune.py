"""Fine-tuning encoder + head end to end (classifier.finetune_epochs)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pucl.classify.base import LinearHead
from pucl.classify.finetune import FinetuneSettings, finetune
from pucl.data.augment import AffineJitter, normalize, to_unit_float
from pucl.errors import ParamsError
from pucl.models import make_encoder
from tests.conftest import make_project, tiny_params
from tests.helpers import STAGES, read_metrics, stage

IDENTITY = AffineJitter(degrees=0.0, translate=0.0, scale_min=1.0, scale_max=1.0,
                        brightness=0.0, contrast=0.0)


def corner_images(n: int, rng: np.random.Generator, patch: int = 60):
    """Positives carry a faint 6x6 patch in the top-left corner, negatives in the
    bottom-right, under strong pixel noise: a random encoder's features barely show it."""
    y = rng.integers(0, 2, size=n)
    x = rng.integers(0, 120, size=(n, 1, 28, 28)).astype(np.int64)
    for i, label in enumerate(y):
        if label:
            x[i, 0, 2:8, 2:8] += patch
        else:
            x[i, 0, 20:26, 20:26] += patch
    return torch.from_numpy(x.clip(0, 255).astype(np.uint8)), torch.from_numpy(y)


@torch.no_grad()
def accuracy(encoder, head, x, y) -> float:
    encoder.eval()
    head.eval()
    return float((head(encoder(normalize(to_unit_float(x)))).argmax(1) == y).float().mean())


def random_start(x):
    torch.manual_seed(0)
    encoder = make_encoder("lenet5", (1, 28, 28)).eval()
    head = LinearHead(encoder.out_dim)
    with torch.no_grad():
        f = encoder(normalize(to_unit_float(x)))
    head.mean.copy_(f.mean(0))
    head.scale.copy_(f.std(0).clamp_min(1e-6))
    return encoder, head


def test_finetuning_learns_what_a_head_on_frozen_random_features_misses():
    from pucl.classify.linear import LinearSettings, train_linear_head

    rng = np.random.default_rng(0)
    x, y = corner_images(1200, rng)
    x_test, y_test = corner_images(400, rng)
    encoder, _ = random_start(x)
    with torch.no_grad():
        features = encoder(normalize(to_unit_float(x))).numpy()
    head, _ = train_linear_head(features, y.numpy(), LinearSettings(50, 1e-2, 0.0, 64),
                                torch.Generator().manual_seed(0), progress=False)
    frozen = accuracy(encoder, head, x_test, y_test)
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    losses = finetune(encoder, head, x, FinetuneSettings(4, 2e-3, 0.0, 64), IDENTITY,
                      torch.Generator().manual_seed(0), torch.device("cpu"), labels=y,
                      progress=False)
    assert len(losses) == 4 and losses[-1] < losses[0]
    assert any(not torch.equal(before[k], v) for k, v in encoder.state_dict().items())
    tuned = accuracy(encoder, head, x_test, y_test)
    assert frozen < 0.85 and tuned >= 0.95, (frozen, tuned)


def test_finetune_refuses_incomplete_arguments():
    x, y = corner_images(8, np.random.default_rng(0))
    encoder, head = random_start(x)
    settings = FinetuneSettings(1, 1e-3, 0.0, 4)
    with pytest.raises(ValueError, match="kind 'ce' needs labels"):
        finetune(encoder, head, x, settings, IDENTITY, torch.Generator(), torch.device("cpu"))
    with pytest.raises(ValueError, match="needs positive, unlabeled and prior"):
        finetune(encoder, head, x, settings, IDENTITY, torch.Generator(), torch.device("cpu"),
                 kind="nnpu", positive=torch.arange(2))


def test_stages_use_the_finetuned_encoder(tmp_path, tracking_uri, monkeypatch):
    from pucl.artifacts.models import load_model
    from tests.helpers import first_member

    params = tiny_params(classifier={"epochs": 3, "objective": "nnpu", "prior": "oracle",
                                     "finetune_epochs": 1})
    project = make_project(tmp_path / "proj", params)
    monkeypatch.setenv("PUCL_ROOT", str(project))
    for name in STAGES:
        stage(project, name)
    pretrained = load_model(project / "data/pretrain/model.pt")
    tuned, head = first_member(project)
    assert tuned is not pretrained
    changed = [k for k, v in tuned.encoder.state_dict().items()
               if not torch.equal(v, pretrained.encoder.state_dict()[k])]
    assert changed  # the fine-tuned weights were saved and are loaded back
    summary = json.loads((project / "data/classifier/summary.json").read_text())
    assert summary["finetune_epochs"] == 1 and summary["objective"] == "nnpu"

    # evaluate's accuracy is the fine-tuned classifier's, recomputed here independently
    import pandas as pd

    from pucl.data import load_dataset

    manifest = pd.read_parquet(project / "data/split/manifest.parquet")
    test = manifest[manifest["split"] == "test"]
    data = load_dataset("mnist5k", test_fraction=0.2, seed=0)
    x = torch.from_numpy(data.x_test[test["index"].to_numpy()])
    with torch.no_grad():
        predicted = head(tuned.encoder(normalize(to_unit_float(x)))).argmax(1).numpy()
    expected = float((predicted == test["y"].to_numpy()).mean())
    metrics = read_metrics(project)
    assert metrics["accuracy"] == pytest.approx(expected, abs=1e-9)
    assert metrics["prototype_bias"] > 0.0


def test_encoder_part_is_lenets_conv_trunk_and_shares_its_weights():
    from pucl.models import make_encoder
    from pucl.models.features import encoder_part

    lenet = make_encoder("lenet5", (1, 28, 28))
    trunk = encoder_part(lenet, "trunk")
    x = torch.randn(4, 1, 28, 28)
    lenet.eval()
    assert trunk(x).shape == (4, 16 * 4 * 4)
    assert torch.equal(lenet.fc(trunk(x)), lenet(x))  # the encoder is its trunk, then fc
    assert all(any(p is q for q in lenet.parameters()) for p in trunk.parameters())
    mlp = make_encoder("mlp", (1, 28, 28))
    assert encoder_part(mlp, "trunk") is mlp and encoder_part(lenet, "encoder") is lenet
    with pytest.raises(ValueError, match="which must be 'encoder' or 'trunk', got 'fc'"):
        encoder_part(lenet, "fc")


def test_a_head_on_the_trunk_is_evaluated_and_served_on_the_trunk(tmp_path, tracking_uri,
                                                                  monkeypatch):
    """classifier.features: trunk, with neighbour smoothing, mirror and
    translated views (evaluate.tta: hflip, tta_shift: 1). The fine-tuned trunk and the head
    on its 256-d features give evaluate's accuracy, recomputed here from the saved files, a
    naive smoothing over the training rows and the mean over each test image, its mirror
    and their 1-pixel translations (padded and cropped here); the FC layers the head does
    not read stay as pretrained."""
    import pandas as pd

    from pucl.artifacts.models import load_model
    from pucl.data import load_dataset
    from tests.helpers import first_member
    from tests.test_neighbours import naive_smoothed

    params = tiny_params(classifier={"epochs": 3, "objective": "nnpu", "prior": "oracle",
                                     "finetune_epochs": 1, "features": "trunk",
                                     "neighbours": 5},
                         evaluate={"tta": "hflip", "tta_shift": 1})
    project = make_project(tmp_path / "proj", params)
    monkeypatch.setenv("PUCL_ROOT", str(project))
    monkeypatch.setenv("PUCL_TRACKING", "off")  # no model export: the files are the subject
    for name in STAGES:
        stage(project, name)
    pretrained = load_model(project / "data/pretrain/model.pt")
    tuned, head = first_member(project)
    assert head.k == 5 and head.base.linear.in_features == 256
    before, after = pretrained.encoder.state_dict(), tuned.encoder.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("fc."))
    assert any(not torch.equal(before[k], after[k]) for k in before if k.startswith("features."))
    summary = json.loads((project / "data/classifier/summary.json").read_text())
    assert summary["features"] == "trunk" and summary["neighbours"] == 5

    manifest = pd.read_parquet(project / "data/split/manifest.parquet")
    history = pd.read_csv(project / "data/classifier/history.csv")
    assert list(history["phase"]) == ["head"] * 3 + ["finetune"]
    test, train = manifest[manifest["split"] == "test"], manifest[manifest["split"] == "train"]
    data = load_dataset("mnist5k", test_fraction=0.2, seed=0)
    bank_rows = train.loc[train["in_u"] | (train["pu"] == 1), "index"].to_numpy()

    def trunk(rows, mirror=False, dx=0, dy=0):
        with torch.no_grad():
            tuned.eval()
            x = data.x_train[rows] if rows is not None else data.x_test[test["index"].to_numpy()]
            x = x[..., ::-1] if mirror else x  # evaluate.tta: hflip
            # tta_shift: content moves dx right and dy down, black comes in
            h, w = x.shape[-2:]
            x = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])[..., 1 - dy:1 - dy + h,
                                                              1 - dx:1 - dx + w]
            x = torch.from_numpy(np.ascontiguousarray(x))
            return tuned.encoder.features(normalize(to_unit_float(x))).numpy()

    def accuracy(scores):
        return float(((scores >= 0.5) == test["y"].to_numpy()).mean())

    bank = trunk(np.sort(bank_rows))
    views = [trunk(None, mirror, dx, dy) for mirror in (False, True)
             for dx in (-1, 0, 1) for dy in (-1, 0, 1)]
    assert len(views) == 18
    smoothed = [naive_smoothed(head.base, bank, view, 5) for view in views]
    metrics = read_metrics(project)
    assert metrics["accuracy"] == pytest.approx(accuracy(np.mean(smoothed, axis=0)), abs=1e-9)
    assert metrics["accuracy_one_view"] == pytest.approx(accuracy(smoothed[4]), abs=1e-9)
    own = [head.base.positive_score(view) for view in views]  # the head alone, beside it
    assert metrics["accuracy_unsmoothed"] == pytest.approx(accuracy(np.mean(own, axis=0)),
                                                           abs=1e-9)
    assert 0.5 <= metrics["knn_accuracy_trunk"] <= 1.0


def test_method_head_reads_the_encoder_only():
    from pucl.params.config import parse_params

    with pytest.raises(ParamsError, match="classifier.features must be 'encoder' with "
                                          "objective 'method_head'"):
        parse_params({"pretrain": {"method": "ncpu"},
                      "classifier": {"objective": "method_head", "features": "trunk"}})


def labelled_corners(patch: int, seed: int = 1):
    """Corner images for training and test, and a third of the training positives labelled."""
    rng = np.random.default_rng(seed)
    x, y = corner_images(1200, rng, patch=patch)
    x_test, y_test = corner_images(400, rng, patch=patch)
    positives = np.flatnonzero(y.numpy() == 1)
    labelled = torch.from_numpy(rng.choice(positives, len(positives) // 3, replace=False))
    return x, y, x_test, y_test, labelled


@pytest.mark.parametrize("kind", ["nnpu", "dist"])
def test_finetuning_on_a_pu_risk_learns_the_corners_from_p_and_u(kind):
    """The PU risks fine-tune end to end too: labelled positives are some of the positive
    images, U all of them, the prior the true one."""
    x, y, x_test, y_test, labelled = labelled_corners(patch=120)
    encoder, head = random_start(x)
    before = accuracy(encoder, head, x_test, y_test)
    losses = finetune(encoder, head, x, FinetuneSettings(6, 5e-3, 0.0, 64), IDENTITY,
                      torch.Generator().manual_seed(0), torch.device("cpu"),
                      positive=labelled, unlabeled=torch.arange(len(x)), kind=kind,
                      prior=float(y.float().mean()), entropy=0.002, progress=False)
    assert len(losses) == 6 and np.isfinite(losses).all() and losses[-1] < losses[0]
    # six short epochs from random weights, with no negative label: well above chance
    after = accuracy(encoder, head, x_test, y_test)
    assert before < 0.65 and after >= 0.75, (before, after)


@pytest.mark.parametrize("kind", ["nnpu", "dist"])
def test_the_pair_term_fine_tunes_a_pu_head_to_the_corners(kind):
    """dist_pu_pairs' order: a PU head on the frozen features first, then encoder and head
    fine-tuned with the pair term, which reads the head's calls as pseudo-labels. Fainter
    patches than above: the frozen head reads them barely above chance. (From a random
    head the pseudo-labels are noise, and whether the pairs then fold the features together
    turned on float rounding: one torch thread against two gave 0.51 against 1.0.)"""
    from pucl.classify.linear import LinearSettings, train_pu_head

    x, y, x_test, y_test, labelled = labelled_corners(patch=40)
    encoder, _ = random_start(x)
    with torch.no_grad():
        features = encoder(normalize(to_unit_float(x))).numpy()
    prior = float(y.float().mean())
    head, _ = train_pu_head(features[labelled.numpy()], features, prior, kind,
                            LinearSettings(5, 1e-2, 0.0, 64), torch.Generator().manual_seed(0),
                            progress=False, entropy=0.002)
    frozen = accuracy(encoder, head, x_test, y_test)
    losses = finetune(encoder, head, x, FinetuneSettings(6, 5e-3, 0.0, 64), IDENTITY,
                      torch.Generator().manual_seed(0), torch.device("cpu"),
                      positive=labelled, unlabeled=torch.arange(len(x)), kind=kind,
                      prior=prior, entropy=0.002, pairs=0.1, progress=False)
    assert len(losses) == 6 and np.isfinite(losses).all() and losses[-1] < losses[0]
    tuned = accuracy(encoder, head, x_test, y_test)
    assert frozen < 0.7 and tuned >= 0.95, (frozen, tuned)
