"""Neighbour smoothing of a head's scores (classifier.neighbours), against a naive
implementation of its definition: (own score + the k nearest bank rows' scores) / (k + 1),
nearest by cosine similarity."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pucl.classify.base import LinearHead
from pucl.classify.deployable import ServedClassifier
from pucl.classify.heads import describe, rebuild
from pucl.classify.neighbours import NeighbourHead


def naive_smoothed(base: LinearHead, bank: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """In float64: cosine similarities, a full stable sort, a plain mean (the head's own
    scores in one batch). Rows go in blocks only so that thousands of test views take
    seconds: each row's neighbours still come from its own full sort."""
    bank_scores = base.positive_score(bank).astype(np.float64)
    own_scores = base.positive_score(rows).astype(np.float64)
    unit_bank = bank / np.linalg.norm(bank, axis=1, keepdims=True).astype(np.float64)
    unit_rows = rows / np.linalg.norm(rows, axis=1, keepdims=True).astype(np.float64)
    out = np.empty(len(rows))
    for start in range(0, len(rows), 256):
        block = slice(start, start + 256)
        similarity = unit_rows[block] @ unit_bank.T
        nearest = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
        out[block] = (own_scores[block] + bank_scores[nearest].sum(axis=1)) / (k + 1)
    return out


def random_head(dim: int, seed: int) -> LinearHead:
    torch.manual_seed(seed)
    head = LinearHead(dim)
    torch.nn.init.normal_(head.linear.weight, std=1.0)
    return head.eval()


@pytest.mark.parametrize("k", [1, 7, 40])
def test_smoothed_scores_match_the_definition(k):
    rng = np.random.default_rng(k)
    bank = rng.normal(size=(300, 12)).astype(np.float32)
    rows = rng.normal(size=(50, 12)).astype(np.float32)
    base = random_head(12, k)
    head = NeighbourHead(base, torch.from_numpy(bank), k)
    expected = naive_smoothed(base, bank, rows, k)
    np.testing.assert_allclose(head.positive_score(rows), expected, atol=1e-5)


def test_the_whole_bank_as_neighbours_is_the_mean_of_every_score():
    rng = np.random.default_rng(0)
    bank = rng.normal(size=(30, 5)).astype(np.float32)
    rows = rng.normal(size=(4, 5)).astype(np.float32)
    base = random_head(5, 0)
    head = NeighbourHead(base, torch.from_numpy(bank), len(bank))
    expected = (base.positive_score(rows) + base.positive_score(bank).sum()) / (len(bank) + 1)
    np.testing.assert_allclose(head.positive_score(rows), expected, atol=1e-6)


def test_an_empty_batch_scores_to_no_rows():
    bank = np.random.default_rng(0).normal(size=(20, 6)).astype(np.float32)
    head = NeighbourHead(random_head(6, 0), torch.from_numpy(bank), 5)
    assert head.positive_score(np.empty((0, 6), dtype=np.float32)).shape == (0,)


def test_a_row_scores_the_same_alone_and_in_a_batch_across_chunks(monkeypatch):
    """Inductive: a row's score depends on the bank only, never on the rows beside it
    (also when the rows are split into chunks)."""
    import pucl.classify.neighbours as neighbours

    monkeypatch.setattr(neighbours, "CHUNK_ROWS", 16)
    rng = np.random.default_rng(1)
    bank = rng.normal(size=(200, 8)).astype(np.float32)
    rows = rng.normal(size=(70, 8)).astype(np.float32)
    head = NeighbourHead(random_head(8, 1), torch.from_numpy(bank), 5)
    batch = head.positive_score(rows)
    alone = np.array([head.positive_score(r[None])[0] for r in rows])
    np.testing.assert_allclose(batch, alone, atol=1e-6)


def test_smoothing_fixes_a_lone_mistake_inside_a_cluster():
    """A head whose boundary cuts off the edge of the positive cluster: a row on that edge
    is called negative alone, positive once its neighbours vote."""
    rng = np.random.default_rng(2)
    positives = rng.normal(loc=[5.0, 0.0], scale=0.3, size=(40, 2)).astype(np.float32)
    negatives = rng.normal(loc=[0.0, 5.0], scale=0.3, size=(40, 2)).astype(np.float32)
    base = LinearHead(2)
    with torch.no_grad():  # logit(positive) - logit(negative) = x - y - 3.5
        base.linear.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, -1.0]]))
        base.linear.bias.copy_(torch.tensor([0.0, -3.5]))
    edge = np.array([[4.0, 1.2]], dtype=np.float32)
    assert base.positive_score(edge)[0] < 0.5
    assert (base.positive_score(positives) >= 0.5).mean() > 0.9
    head = NeighbourHead(base, torch.from_numpy(np.concatenate([positives, negatives])), 10)
    assert head.positive_score(edge)[0] > 0.5
    assert (head.positive_score(negatives) < 0.5).all()


def test_describe_and_rebuild_round_trip_and_serve():
    rng = np.random.default_rng(3)
    bank = rng.normal(size=(64, 6)).astype(np.float32)
    rows = rng.normal(size=(9, 6)).astype(np.float32)
    head = NeighbourHead(random_head(6, 3), torch.from_numpy(bank), 4)
    spec = describe(head)
    assert spec["kind"] == "neighbours" and spec["k"] == 4 and spec["base"]["kind"] == "linear"
    again = rebuild(spec)
    np.testing.assert_allclose(again.positive_score(rows), head.positive_score(rows), atol=1e-7)
    # served: the deployable module (encoder, then head) gives the same scores
    from pucl.data.augment import normalize

    served = ServedClassifier(torch.nn.Identity(), again).eval()
    x = torch.from_numpy(rows)
    with torch.no_grad():
        np.testing.assert_allclose(served(x).numpy(),
                                   again.positive_score(normalize(x).numpy()), atol=1e-6)


def test_the_served_classifier_averages_an_image_and_its_mirror():
    """mirror=True: the mean of the two single-view scores, computed here view by view;
    an image that is its own mirror scores as it does alone."""
    from pucl.data.augment import normalize

    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(1 * 4 * 6, 5))
    head = random_head(5, 2)
    plain = ServedClassifier(encoder, head).eval()
    mirrored = ServedClassifier(encoder, head, mirror=True).eval()
    x = torch.rand(7, 1, 4, 6)
    with torch.no_grad():
        by_hand = [torch.softmax(head(encoder(normalize(v))), dim=1)[:, 1]
                   for v in (x, x[..., torch.arange(5, -1, -1)])]
        np.testing.assert_allclose(mirrored(x).numpy(), ((by_hand[0] + by_hand[1]) / 2).numpy(),
                                   atol=1e-6)
        assert not torch.allclose(mirrored(x), plain(x))  # the mirror changed something
        symmetric = torch.cat([x[..., :3], x[..., :3].flip(-1)], dim=-1)
        np.testing.assert_allclose(mirrored(symmetric).numpy(), plain(symmetric).numpy(),
                                   atol=1e-6)


def test_the_served_classifier_averages_the_translated_views():
    """shift=1: the mean over the 3 x 3 one-pixel translations (padded and cropped here) of
    the image and, with the mirror, of its mirror image."""
    from pucl.data.augment import normalize

    torch.manual_seed(1)
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(1 * 5 * 6, 4))
    head = random_head(4, 2)
    x = torch.rand(6, 1, 5, 6)

    def crops(images):  # the 3 x 3 one-pixel translations, content moving dx right, dy down
        padded = torch.nn.functional.pad(images, (1, 1, 1, 1))
        return [padded[..., 1 - dy:6 - dy, 1 - dx:7 - dx] for dx in (-1, 0, 1) for dy in (-1, 0, 1)]

    with torch.no_grad():
        by_hand = torch.stack([torch.softmax(head(encoder(normalize(v))), dim=1)[:, 1]
                               for v in crops(x) + crops(x.flip(-1))])
        shifted = ServedClassifier(encoder, head, shift=1).eval()
        np.testing.assert_allclose(shifted(x).numpy(), by_hand[:9].mean(0).numpy(), atol=1e-6)
        both = ServedClassifier(encoder, head, mirror=True, shift=1).eval()
        np.testing.assert_allclose(both(x).numpy(), by_hand.mean(0).numpy(), atol=1e-6)


@pytest.mark.parametrize("k", [0, 65])
def test_k_outside_the_bank_is_refused(k):
    bank = torch.zeros(64, 3)
    with pytest.raises(ValueError, match=rf"k must be in \[1, 64\] \(the bank's rows\), got {k}"):
        NeighbourHead(random_head(3, 0), bank, k)
