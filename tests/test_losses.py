"""PUCL (eq. 29) and ssCL (eq. 22) against naive per-anchor float64 implementations."""

from __future__ import annotations

import math
import zlib

import pytest
import torch

from pucl.losses import PUCL, SSCL, make_loss


def naive_loss(z1, z2, is_labeled, tau, kind):
    """Straight from the equations: loop over anchors i of the 2b-view batch."""
    z = torch.cat([z1, z2]).double()
    z = z / z.norm(dim=1, keepdim=True)
    n = z.shape[0]
    b = n // 2
    labeled = list(is_labeled.tolist()) * 2
    total = 0.0
    for i in range(n):
        sim = [float(z[i] @ z[j]) / tau for j in range(n)]
        log_z = math.log(sum(math.exp(sim[j]) for j in range(n) if j != i))
        partner = (i + b) % n
        if kind == "pucl" and labeled[i]:
            others = [j for j in range(n) if j != i and labeled[j]]
            attraction = sum(sim[j] for j in others) / len(others)
        else:
            attraction = sim[partner]
        total += attraction - log_z
    return -total / n


MIXES = {
    "none labelled": [0, 0, 0, 0, 0, 0],
    "one labelled": [0, 0, 1, 0, 0, 0],
    "half labelled": [1, 0, 1, 0, 1, 0],
    "all labelled": [1, 1, 1, 1, 1, 1],
}


@pytest.mark.parametrize("kind", ["pucl", "sscl"])
@pytest.mark.parametrize("mix", list(MIXES))
@pytest.mark.parametrize("tau", [0.1, 0.5])
def test_matches_naive_equation(kind, mix, tau):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{kind}{mix}{tau}".encode()))
    z1 = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    z2 = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    labeled = torch.tensor(MIXES[mix], dtype=torch.bool)
    got = make_loss(kind, temperature=tau)(z1, z2, labeled)
    assert float(got) == pytest.approx(naive_loss(z1, z2, labeled, tau, kind), abs=1e-6)


def test_pucl_without_labelled_equals_sscl():
    z1, z2 = torch.randn(8, 4, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64)
    none = torch.zeros(8, dtype=torch.bool)
    assert torch.allclose(PUCL(0.3)(z1, z2, none), SSCL(0.3)(z1, z2, none), atol=1e-12)


def test_pucl_differs_from_sscl_with_labelled():
    z1, z2 = torch.randn(8, 4, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64)
    some = torch.tensor([1, 1, 1, 0, 0, 0, 0, 0], dtype=torch.bool)
    assert not torch.allclose(PUCL(0.3)(z1, z2, some), SSCL(0.3)(z1, z2, some))


def test_permuting_the_batch_leaves_the_loss_unchanged():
    z1, z2 = torch.randn(10, 6, dtype=torch.float64), torch.randn(10, 6, dtype=torch.float64)
    labeled = torch.tensor([1, 0, 0, 1, 0, 1, 0, 0, 0, 1], dtype=torch.bool)
    perm = torch.randperm(10)
    loss = PUCL(0.5)
    assert torch.allclose(loss(z1, z2, labeled), loss(z1[perm], z2[perm], labeled[perm]),
                          atol=1e-12)


def test_large_similarities_stay_finite():
    """tau = 0.01 gives logits of +-100: log-space computation must not overflow."""
    z = torch.randn(16, 8, dtype=torch.float32)
    labeled = torch.zeros(16, dtype=torch.bool)
    labeled[:4] = True
    value = PUCL(0.01)(z, z + 1e-3 * torch.randn_like(z), labeled)
    assert torch.isfinite(value)


def test_gradients_are_correct():
    z1 = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    z2 = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    labeled = torch.tensor([1, 1, 0, 0, 0], dtype=torch.bool)
    assert torch.autograd.gradcheck(lambda a, b: PUCL(0.5)(a, b, labeled), (z1, z2))


def test_invalid_name_and_params_are_refused():
    with pytest.raises(ValueError, match="allowed: pucl, sscl"):
        make_loss("simclr")
    with pytest.raises(ValueError, match="temperature must be > 0"):
        make_loss("pucl", temperature=0.0)
    with pytest.raises(ValueError, match="is_labeled"):
        PUCL()(torch.randn(4, 3), torch.randn(4, 3), torch.ones(3, dtype=torch.bool))
