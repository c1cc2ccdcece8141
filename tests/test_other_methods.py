"""Building blocks of NcPU (paper 001) and SSC (paper 003) against their equations."""

from __future__ import annotations

import contextlib
import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pucl.losses.noncontrastive import noisncl_loss
from pucl.losses.ssc import prototype_probabilities, unlabeled_targets, weighted_supcon
from pucl.pretraining.ncpu import SelfAdaptiveThreshold, phantom_targets, update_prototypes


def naive_noisncl(q, k, labels_q, labels_k):
    """Eq. 7 pair by pair, averaged over pairs per anchor, then over anchors (eq. 14)."""
    per_anchor = []
    for i in range(len(q)):
        terms = []
        for j in range(len(k)):
            if labels_q[i] == labels_k[j]:
                s = float(torch.dot(q[i] / q[i].norm(), k[j] / k[j].norm()))
                s = min(max(s, 1e-4), 1 - 1e-4)
                terms.append(2 * math.sqrt(1 - s))
        if terms:
            per_anchor.append(sum(terms) / len(terms))
    return sum(per_anchor) / len(per_anchor)


def test_noisncl_equals_eq7_pair_by_pair():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(9, 5, generator=g), torch.randn(7, 5, generator=g)
    k[0] = q[0] * 3.0  # a similarity of 1 is clamped, not a NaN gradient
    labels_q = torch.tensor([0, 1, 1, 0, 2, 2, 1, 0, 3])  # class 3 has no target: left out
    labels_k = torch.tensor([0, 1, 0, 2, 1, 2, 0])
    mask = labels_q.view(-1, 1) == labels_k.view(1, -1)
    got = noisncl_loss(q.requires_grad_(), k, mask)
    assert got.item() == pytest.approx(naive_noisncl(q.detach(), k, labels_q, labels_k),
                                       rel=1e-6)
    got.backward()
    assert torch.isfinite(q.grad).all()


def plain_pair_loss(q, k, same_class):
    """Supervised BYOL (paper 001 eq. 5), one pair: 2 (1 - s_ij), the target detached:
    the loss NoiSNCL's square root is compared with."""
    s = torch.nn.functional.normalize(q, dim=1) @ torch.nn.functional.normalize(
        k.detach(), dim=1).T
    return (2.0 * (1.0 - s))[same_class].mean()


def _grad_norm_sq(loss_fn, q, k):
    q = q.clone().requires_grad_()
    loss_fn(q, k, torch.ones(1, 1, dtype=torch.bool)).backward()
    return float(q.grad.pow(2).sum())


@pytest.mark.parametrize("scale", [1.0, 2.5])
def test_gradient_norms_follow_eq6_and_eq8(scale):
    """A clean pair (similarity 0.9) and a noisy pair (0.1): the square root gives the
    clean pair the larger gradient (eq. 8), the plain loss the noisy one (eq. 6)."""
    q = torch.tensor([[scale, 0.0]])

    def at(sim):
        return torch.tensor([[sim, math.sqrt(1 - sim ** 2)]])

    for sim in (0.9, 0.1):
        assert _grad_norm_sq(noisncl_loss, q, at(sim)) == pytest.approx(
            (1 + sim) / scale ** 2, rel=1e-5)
        assert _grad_norm_sq(plain_pair_loss, q, at(sim)) == pytest.approx(
            4 * (1 - sim ** 2) / scale ** 2, rel=1e-5)
    assert _grad_norm_sq(noisncl_loss, q, at(0.9)) > _grad_norm_sq(noisncl_loss, q, at(0.1))
    assert _grad_norm_sq(plain_pair_loss, q, at(0.9)) < \
        _grad_norm_sq(plain_pair_loss, q, at(0.1))


def test_self_adaptive_threshold_follows_eq12_13_on_a_script():
    sat = SelfAdaptiveThreshold(gamma=0.9)
    tau_tilde, rho = 0.5, [0.5, 0.5]
    script = [[[0.9, 0.1], [0.6, 0.4]], [[0.2, 0.8], [0.3, 0.7], [0.1, 0.9]],
              [[0.5, 0.5], [0.95, 0.05]]]
    for batch in script:
        got = sat.update(torch.tensor(batch, dtype=torch.float64))
        tau_tilde = 0.9 * tau_tilde + 0.1 * sum(max(p) for p in batch) / len(batch)
        rho = [0.9 * rho[c] + 0.1 * sum(p[c] for p in batch) / len(batch) for c in (0, 1)]
        assert got == pytest.approx(rho[1] / max(rho) * tau_tilde, abs=1e-12)
    assert sat.tau == pytest.approx(got)


def test_prototypes_move_sample_by_sample_as_in_algorithm_1():
    mu = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    q = torch.tensor([[0.0, 2.0], [1.0, 1.0], [3.0, 0.0]])
    got = update_prototypes(mu, q, torch.tensor([0, 0, 1]), alpha=0.5)
    expect0 = F.normalize(0.5 * mu[0] + 0.5 * torch.tensor([0.0, 1.0]), dim=0)
    expect0 = F.normalize(0.5 * expect0 + 0.5 * F.normalize(q[1], dim=0), dim=0)
    expect1 = F.normalize(0.5 * mu[1] + 0.5 * torch.tensor([1.0, 0.0]), dim=0)
    torch.testing.assert_close(got, torch.stack([expect0, expect1]))
    torch.testing.assert_close(mu, torch.tensor([[1.0, 0.0], [0.0, 1.0]]))  # not in place


def test_phantom_targets_gate_negatives_and_keep_positives():
    prototypes = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    q = torch.tensor([[1.0, 0.1], [0.1, 1.0], [1.0, 0.0], [0.0, 1.0]])
    s_prime = torch.tensor([[0.0, 1.0], [0.0, 1.0], [0.5, 0.5], [0.0, 1.0]])
    negative_prob = torch.tensor([0.2, 0.9, 0.95, 0.1])
    labeled = torch.tensor([False, False, False, True])
    s, new_prime = phantom_targets(s_prime, q, prototypes, negative_prob, tau=0.7, beta=0.8,
                                   labeled=labeled)
    # row 0: below tau, so s = s' moved 20% towards its nearest (positive) prototype
    torch.testing.assert_close(s[0], torch.tensor([0.2, 0.8]))
    # rows 1-2: the classifier is confident it is negative: [0, 1] now, yet s' keeps its
    # own course (regret: it is not reset), here towards the positive prototype for row 2
    torch.testing.assert_close(s[1], torch.tensor([0.0, 1.0]))
    torch.testing.assert_close(s[2], torch.tensor([0.0, 1.0]))
    torch.testing.assert_close(new_prime[2], torch.tensor([0.6, 0.4]))
    torch.testing.assert_close(s[3], torch.tensor([1.0, 0.0]))  # labelled positive


def test_ssc_with_one_example_and_the_prototypes_is_cross_entropy_at_t1():
    """Eq. 10-11: each example's SupCon with the prototypes (prototype anchors weight 0)
    is the cross-entropy of a bias-free linear layer whose weights are the prototypes."""
    g = torch.Generator().manual_seed(1)
    k = 3
    prototypes = F.normalize(torch.randn(k, 6, generator=g), dim=1)
    examples = F.normalize(torch.randn(5, 6, generator=g), dim=1)
    labels = torch.tensor([0, 2, 1, 1, 0])
    per_example = [
        weighted_supcon(torch.cat([examples[i:i + 1], prototypes]),
                        torch.cat([labels[i:i + 1], torch.arange(k)]),
                        torch.tensor([1.0] + [0.0] * k), temperature=1.0)
        for i in range(len(examples))]
    ce = F.cross_entropy(examples @ prototypes.T, labels)
    assert float(sum(per_example) / len(per_example)) == pytest.approx(float(ce), rel=1e-6)


def test_weighted_supcon_equals_a_naive_double_loop():
    g = torch.Generator().manual_seed(2)
    z = torch.randn(8, 4, generator=g)
    labels = torch.tensor([0, 0, 1, 1, 5, 6, 2, 2])  # 5 and 6: anchors without a positive
    weights = torch.tensor([1.0, 1.0, 0.5, 0.5, 2.0, 2.0, 0.0, 3.0])
    zn = F.normalize(z, dim=1)
    total, norm = 0.0, 0.0
    for i in range(8):
        pos = [p for p in range(8) if p != i and labels[p] == labels[i]]
        if not pos:
            continue
        denom = sum(math.exp(float(zn[i] @ zn[j]) / 0.3) for j in range(8) if j != i)
        terms = [math.log(math.exp(float(zn[i] @ zn[p]) / 0.3) / denom) for p in pos]
        total += -float(weights[i]) * sum(terms) / len(terms)
        norm += float(weights[i])
    assert float(weighted_supcon(z, labels, weights, 0.3)) == pytest.approx(total / norm,
                                                                            rel=1e-6)


def test_unconfident_unlabeled_samples_get_unique_labels():
    prototypes = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    z_weak = torch.tensor([[1.0, 0.05], [0.7, 0.7], [0.0, 1.0]])
    probs = prototype_probabilities(z_weak, prototypes, temperature=0.1)
    assert torch.allclose(probs.sum(dim=1), torch.ones(3))
    labels, confident = unlabeled_targets(probs, threshold=0.95)
    assert confident.tolist() == [True, False, True]
    assert labels.tolist() == [0, 2 + 1, 1]  # the unsure one: K + its row, unique


def test_ncpu_loss_is_eq14_with_the_entropy_term():
    from pucl.pretraining.ncpu import ncpu_step_loss

    f = torch.tensor([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4], [0.2, 0.8]], dtype=torch.float64)
    s = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [1.0, 0.0]], dtype=torch.float64)
    labeled = torch.tensor([True, False, False, True])
    pair = torch.tensor(0.3, dtype=torch.float64)
    ce = [-(s[i] * f[i].log()).sum().item() for i in range(4)]
    mean = f.mean(dim=0)
    expected = (ce[0] + ce[3]) / 2 + (ce[1] + ce[2]) / 2 + 50 * 0.3 + 5 * float(
        (mean * mean.log()).sum())
    assert float(ncpu_step_loss(f, s, labeled, pair, w_r=50, w_ent=5)) == pytest.approx(expected)


class Interrupted(Exception):
    pass


def _tiny_ncpu(epochs, resume=None, states=None):
    from pucl.data.augment import AffineJitter
    from pucl.models import ContrastiveModel
    from pucl.pretraining.ncpu import NcPUNetwork, NcPUSettings, train_ncpu

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    images = torch.randint(0, 256, (96, 1, 28, 28), generator=g, dtype=torch.uint8)
    labeled = torch.zeros(96, dtype=torch.bool)
    labeled[:20] = True
    network = NcPUNetwork(ContrastiveModel("lenet5", (1, 28, 28), 32, 16), 16, 32)
    settings = NcPUSettings(epochs=3, batch_size=32, lr=1e-3, weight_decay=0.0,
                            warmup_epochs=1)
    gen = torch.Generator().manual_seed(0)

    def keep(stats, state):
        if states is not None:
            states.append(copy.deepcopy(state))
        if stats.epoch == epochs:
            raise Interrupted  # a crash right after the checkpoint of epoch `epochs`

    with contextlib.suppress(Interrupted):
        train_ncpu(network, images, labeled, AffineJitter(), settings, gen,
                   torch.device("cpu"), resume=resume, on_epoch=keep, progress=False)
    return network


def test_ncpu_resumes_bit_for_bit():
    straight = _tiny_ncpu(3)
    states: list = []
    _tiny_ncpu(1, states=states)
    resumed = _tiny_ncpu(3, resume=states[-1])
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name


def test_method_head_without_a_method_is_refused():
    from pucl.errors import ParamsError
    from pucl.params.config import parse_params

    with pytest.raises(ParamsError, match="^classifier.objective 'method_head' needs "
                                          "pretrain.method ncpu"):
        parse_params({"classifier": {"objective": "method_head"}})
    with pytest.raises(ParamsError, match="finetune_epochs must be 0"):
        parse_params({"pretrain": {"method": "ncpu"},
                      "classifier": {"objective": "method_head", "finetune_epochs": 2}})


def _ssc_loss_by_hand(model, prototypes, x_l, u1, u2, weak, settings,
                      forced_negatives: int) -> tuple[float, float]:
    """Paper 003's eq. 5-9 written out: eq. 6 on the weak view, eq. 5 labels (unique
    ones for unconfident U), eq. 9 weights, eq. 8 over the batch plus both prototypes.
    `forced_negatives`: that many least positive U labelled negative (our PU variant).
    Returns (loss, confident share)."""
    probs = torch.softmax(F.normalize(model(weak), dim=1) @ prototypes.T
                          / settings.proto_temperature, dim=1)
    conf, guess = probs.max(dim=1)
    confident = conf > settings.threshold
    y_u = torch.where(confident, guess, 2 + torch.arange(len(weak)))
    lowest = probs[:, 1].argsort()[:forced_negatives]
    y_u[lowest] = 0
    confident[lowest] = True
    labels = torch.cat([torch.ones(len(x_l), dtype=torch.long), y_u, y_u,
                        torch.tensor([0, 1])])
    w_u = torch.where(confident, settings.weight_confident, settings.weight_unconfident)
    weights = torch.cat([torch.full((len(x_l),), settings.weight_labeled), w_u, w_u,
                         torch.full((2,), settings.weight_prototypes)])
    z = torch.cat([model(torch.cat([x_l, u1, u2])), prototypes])
    loss = weighted_supcon(z, labels, weights, settings.temperature).item()
    return loss, float(confident.float().mean())


@pytest.mark.parametrize("seed, n_u, options, forced_negatives", [
    # the paper's eq. 5-9 with unequal weights
    (0, 3, {"threshold": 0.9, "weight_labeled": 2.0, "weight_prototypes": 3.0}, 0),
    # with a prior: round((1 - 0.6) * 5) = 2 of the 5 least positive U forced negative;
    # a mild prototype softmax (T' = 1, so p <= 0.89) leaves none confident on its own
    (1, 5, {"threshold": 0.99, "proto_temperature": 1.0, "prior": 0.6}, 2),
])
def test_ssc_batch_composes_eq5_to_eq9(seed, n_u, options, forced_negatives):
    from pucl.pretraining.ssc import SSCSettings, ssc_batch

    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 3)
    prototypes = F.normalize(torch.randn(2, 3), dim=1)
    x_l, u1, u2, weak = (torch.randn(n, 4) for n in (2, n_u, n_u, n_u))
    settings = SSCSettings(1, 8, 1e-3, 0.0, **{
        "temperature": 0.5, "proto_temperature": 0.05, "weight_confident": 1.0,
        "weight_unconfident": 0.5, **options})
    loss, share = ssc_batch(model, prototypes, x_l, u1, u2, weak, settings)
    expected_loss, expected_share = _ssc_loss_by_hand(model, prototypes, x_l, u1, u2, weak,
                                                      settings, forced_negatives)
    assert loss.item() == pytest.approx(expected_loss)
    assert share == pytest.approx(expected_share)


def test_prior_ranked_negatives_are_the_least_positive_share():
    from pucl.losses.ssc import prior_ranked_negatives

    positive_prob = torch.tensor([0.9, 0.1, 0.5, 0.3, 0.7])
    assert prior_ranked_negatives(positive_prob, 0.4).tolist() == [False, True, False, True,
                                                                   False]
    assert not prior_ranked_negatives(positive_prob, 0.0).any()
    assert prior_ranked_negatives(positive_prob, 1.0).all()
    with pytest.raises(ValueError, match="negative_share must be in"):
        prior_ranked_negatives(positive_prob, 1.5)


def test_heads_survive_describe_and_rebuild():
    from pucl.classify.base import LinearHead
    from pucl.classify.heads import describe, rebuild
    from pucl.classify.prototype import PrototypeHead

    torch.manual_seed(0)
    h = torch.randn(5, 7)
    for head in (LinearHead(7), PrototypeHead(7, 16, 4, temperature=0.2)):
        with torch.no_grad():
            for p in head.parameters():
                p.normal_()
        head.eval()
        again = rebuild(describe(head))
        assert type(again) is type(head)
        torch.testing.assert_close(again(h), head(h))
    # the prototype head is the softmax of eq. 6 over the projector's output
    proto = PrototypeHead(7, 16, 4, temperature=0.2).eval()
    expected = torch.softmax(F.normalize(proto.projector(h), dim=1)
                             @ F.normalize(proto.prototypes, dim=1).T / 0.2, dim=1)[:, 1]
    np_scores = proto.positive_score(h.numpy())
    torch.testing.assert_close(torch.from_numpy(np_scores), expected.detach())


def _run_method_through_the_stages(root, method: str, **pretrain):
    """Every stage on the embedded digits with `method`'s own classifier; returns the
    project directory."""
    from tests.conftest import make_project, tiny_params
    from tests.helpers import STAGES, stage

    # every training row, as when the accuracy floors below were measured
    params = tiny_params(pretrain={"method": method, "batch_size": 256, **pretrain},
                         split={"val_fraction": 0.0, "max_unlabeled": None},
                         classifier={"objective": "method_head"},
                         evaluate={"tta_shift": 0})  # one view (test-time views: own tests)
    project = make_project(root / "proj", params)
    for name in STAGES:
        stage(project, name)
    return project


def _accuracy_recomputed(project, head) -> float:
    """Test accuracy of `head` on the pretrained encoder, from the raw digits."""
    import pandas as pd

    from pucl.artifacts.models import load_model
    from pucl.data import load_dataset
    from pucl.data.augment import normalize, to_unit_float

    manifest = pd.read_parquet(project / "data/split/manifest.parquet")
    test = manifest[manifest["split"] == "test"]
    x = load_dataset("mnist5k", test_fraction=0.2, seed=0).x_test[test["index"].to_numpy()]
    model = load_model(project / "data/pretrain/model.pt")
    with torch.no_grad():
        features = model.encoder(normalize(to_unit_float(torch.from_numpy(x))))
        predicted = head.eval()(features).argmax(1).numpy()
    return float((predicted == test["y"].to_numpy()).mean())


@pytest.mark.parametrize(("method", "pretrain", "head_type", "floor"), [
    # 4 epochs on 4,000 digits, no prior: far above the 0.5 of a constant answer
    ("ncpu", {"epochs": 4, "ncpu": {"warmup_epochs": 1}}, "LinearHead", 0.85),
    # SSC's negative prototype gets no labelled member on PU data: no floor to promise
    ("ssc", {"epochs": 2}, "PrototypeHead", 0.0),
    # with prior-ranked pseudo-negatives (KM2's prior) it has members from the start and
    # beats a constant answer (0.5 here) within 6 epochs (0.654; 0.891 after 50)
    ("ssc", {"epochs": 6, "ssc": {"negatives": "prior_rank"}}, "PrototypeHead", 0.6),
])
def test_methods_run_through_the_stages_and_evaluate_scores_their_classifier(
        tmp_path, tracking_uri, monkeypatch, method, pretrain, head_type, floor):
    from pucl.artifacts.models import load_method_heads
    from tests.helpers import first_member, read_metrics

    monkeypatch.setenv("PUCL_ROOT", str(tmp_path / "proj"))
    project = _run_method_through_the_stages(tmp_path, method, **pretrain)
    joint = load_method_heads(project / "data/pretrain/model.pt")[0]
    written = first_member(project)[1]
    assert type(written).__name__ == head_type
    for (name, a), b in zip(joint.state_dict().items(), written.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name
    metrics = read_metrics(project)
    assert metrics["accuracy"] == pytest.approx(_accuracy_recomputed(project, written),
                                                abs=1e-9)
    assert metrics["accuracy"] >= floor, metrics


def test_prototype_bias_against_eq16_written_out():
    from pucl.evaluation.metrics import prototype_bias

    rng = np.random.default_rng(0)
    views = rng.normal(size=(6, 3, 4))
    labels = np.array([0, 1, 0, 1, 1, 0])
    gaps = []
    for i in range(6):
        same = [j for j in range(6) if labels[j] == labels[i]]
        class_proto = np.mean([views[j, t] for j in same for t in range(3)], axis=0)
        gaps.append(np.linalg.norm(class_proto - views[i].mean(axis=0)))
    assert prototype_bias(views, labels) == pytest.approx(np.mean(gaps))
    # every sample of a class with the same views: no bias at all
    tied = np.repeat(np.array([[1.0, 0.0], [0.0, 1.0]])[[0, 1, 0]][:, None, :], 2, axis=1)
    assert prototype_bias(tied, np.array([0, 1, 0])) == 0.0


def test_knn_probe_against_a_cosine_vote_written_out():
    from pucl.evaluation.metrics import knn_accuracy

    rng = np.random.default_rng(0)
    train, test = rng.normal(size=(60, 5)), rng.normal(size=(25, 5))
    y_train = (train[:, 0] + 0.5 * rng.normal(size=60) > 0).astype(int)
    y_test = (test[:, 0] > 0).astype(int)
    k = 7  # odd: no tied votes between two classes

    def unit(a):
        return a / np.linalg.norm(a, axis=1, keepdims=True)

    nearest = np.argsort(-(unit(test) @ unit(train).T), axis=1)[:, :k]
    predicted = (y_train[nearest].mean(axis=1) > 0.5).astype(int)
    expected = float((predicted == y_test).mean())
    assert 0.0 < expected < 1.0  # a probe that is neither always right nor always wrong
    assert knn_accuracy(train, y_train, test, y_test, k) == pytest.approx(expected)


def test_knn_probe_breaks_a_tied_vote_for_the_smaller_label():
    from pucl.evaluation.metrics import knn_accuracy

    # three classes (labels 2, 5, 9) on a circle; k = 4 leaves 2:2 ties to break
    rng = np.random.default_rng(1)
    angles = rng.uniform(0, 2 * np.pi, size=90)
    train = np.stack([np.cos(angles), np.sin(angles)], axis=1) * rng.uniform(1, 3, (90, 1))
    y_train = np.array([2, 5, 9])[(angles // (2 * np.pi / 3)).astype(int)]
    test_angles = rng.uniform(0, 2 * np.pi, size=200)
    test = np.stack([np.cos(test_angles), np.sin(test_angles)], axis=1)
    k = 4
    similarity = test @ (train / np.linalg.norm(train, axis=1, keepdims=True)).T
    nearest = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
    predicted = []
    for row in y_train[nearest]:
        labels, counts = np.unique(row, return_counts=True)  # labels ascending
        predicted.append(labels[np.argmax(counts)])  # first of the most voted: smallest
    assert any(np.unique(row, return_counts=True)[1].max() == 2 and
               len(np.unique(row)) == 2 for row in y_train[nearest])  # a tie happens
    for y_test in (np.array(predicted), np.full(200, 5)):
        expected = float((np.array(predicted) == y_test).mean())
        assert knn_accuracy(train, y_train, test, y_test, k) == pytest.approx(expected)


def test_knn_probe_with_k_beyond_the_rows_votes_over_all_of_them():
    from pucl.evaluation.metrics import knn_accuracy

    rng = np.random.default_rng(2)
    train, test = rng.normal(size=(5, 3)), rng.normal(size=(8, 3))
    y_train = np.array([1, 1, 1, 0, 0])  # every test row's vote over all five: label 1
    assert knn_accuracy(train, y_train, test, np.ones(8, int), k=20) == 1.0
    assert knn_accuracy(train, y_train, test, np.zeros(8, int), k=20,
                        device=torch.device("cpu")) == 0.0


def test_knn_probe_ranks_an_all_zero_row_at_similarity_zero():
    from pucl.evaluation.metrics import knn_accuracy

    train = np.array([[1.0, 0.0], [0.9, 0.1], [-1.0, 0.0], [0.0, 0.0]])
    test = np.array([[2.0, 0.1], [-3.0, 0.2]])
    # cosines: first query 1.0, 1.0, -1.0, 0 (zero row); second -1.0, -0.98, 1.0, 0. With
    # k = 3 the second votes rows 2, 3 and 1 (label 0 by two to one) only because the zero
    # row outranks the rows that point away, as scikit-learn's cosine distance of 1 did.
    assert knn_accuracy(train, np.array([1, 1, 0, 0]), test, np.array([1, 0]), k=3) == 1.0


def test_input_features_are_the_encoder_input_flattened():
    from pucl.models.features import input_features

    images = np.array([[[[0, 255], [51, 102]]], [[[255, 255], [0, 0]]]], dtype=np.uint8)
    expected = np.array([[-1.0, 1.0, -0.6, -0.2], [1.0, 1.0, -1.0, -1.0]], dtype=np.float32)
    np.testing.assert_allclose(input_features(images), expected, atol=1e-6)
    rows = np.array([[0.5, -3.0], [2.0, 7.0]], dtype=np.float32)  # tabular: unchanged
    np.testing.assert_array_equal(input_features(rows), rows)


def test_noisncl_with_no_pair_is_zero_and_keeps_the_graph():
    # no anchor shares a class with any target: eq. 14's term is empty, read as 0
    q = torch.randn(4, 3, requires_grad=True)
    got = noisncl_loss(q, torch.randn(5, 3), torch.zeros(4, 5, dtype=torch.bool))
    assert got.item() == 0.0
    got.backward()
    assert torch.equal(q.grad, torch.zeros_like(q))
