"""Every objective against a naive per-anchor float64 implementation written straight from
the printed equations (paper 000 eq. 22, 25, 28, 29, 37-39, 41-42; paper 002 eq. 17), with
docs/objectives.md's reading notes; plus the limits and invariances that must hold."""

from __future__ import annotations

import math
import zlib

import pytest
import torch

from pucl.losses import (
    CONTRASTIVE_LOSSES,
    DCL,
    MCL,
    PUCL,
    PUNCE,
    SCLPU,
    SSCL,
    make_loss,
)

TAU = 0.5


def naive_loss(z1, z2, is_labeled, kind, tau=TAU, pi=0.3, lam=0.4, alpha=2.0, blam=1.5):
    z = torch.cat([z1, z2]).double()
    z = z / z.norm(dim=1, keepdim=True)
    n = z.shape[0]
    b = n // 2
    lab = [bool(v) for v in is_labeled.tolist()] * 2
    cos = [[float(z[i] @ z[j]) for j in range(n)] for i in range(n)]
    total = 0.0
    for i in range(n):
        a = (i + b) % n
        s = [c / tau for c in cos[i]]
        log_z = math.log(sum(math.exp(s[j]) for j in range(n) if j != i))
        p_others = [j for j in range(n) if j != i and lab[j]]
        u_others = [j for j in range(n) if j != i and not lab[j]]

        def mean(idx, sims=s):
            return sum(sims[j] for j in idx) / len(idx)

        if kind == "sscl":
            term = s[a] - log_z
        elif kind == "pucl":
            term = (mean(p_others) if lab[i] else s[a]) - log_z
        elif kind == "scl_pu":
            term = (mean(p_others) if lab[i] else mean(u_others)) - log_z
        elif kind == "mcl":
            sup = mean(p_others) if lab[i] else mean(u_others)
            term = lam * (sup - log_z) + (1 - lam) * (s[a] - log_z)
        elif kind == "punce":
            if lab[i]:
                term = mean(p_others) - log_z  # eq. 37
            else:  # eq. 38, with (1 - pi) log(z_i . z_a) read as (1 - pi) s_ia
                p_all = [j for j in range(n) if lab[j]]
                term = pi / (len(p_all) + 1) * (sum(s[j] for j in p_all) + s[a]) \
                    + (1 - pi) * s[a] - log_z
        elif kind == "dcl":
            big_n = n - 2
            neg = sum(math.exp(s[j]) for j in range(n) if j not in (i, a))
            ng = max((neg - pi * big_n * math.exp(s[a])) / (1 - pi),
                     big_n * math.exp(-1 / tau))
            term = math.log(math.exp(s[a]) / (math.exp(s[a]) + ng))
        elif kind in ("balanced", "balanced_pucl"):
            pos = p_others if (kind == "balanced_pucl" and lab[i]) else [a]
            neg = [j for j in range(n) if j != i and j not in pos]
            repel = math.log(sum(math.exp(alpha * cos[i][j]) for j in neg)) if neg else 0.0
            term = mean(pos, cos[i]) - blam / alpha * repel
        else:
            raise ValueError(kind)
        total += term
    return -total / n


PARAMS = {"mcl": {"mcl_lambda": 0.4}, "punce": {"pi": 0.3}, "dcl": {"pi": 0.3},
          "balanced": {"alpha": 2.0, "balance_lambda": 1.5},
          "balanced_pucl": {"alpha": 2.0, "balance_lambda": 1.5}}


def build(kind, **extra):
    params = {"temperature": TAU, **PARAMS.get(kind, {}), **extra}
    if kind.startswith("balanced"):
        params.pop("temperature")
    return make_loss(kind, **params)


MIXES = {
    "none labelled": [0, 0, 0, 0, 0, 0],
    "one labelled": [0, 0, 1, 0, 0, 0],
    "half labelled": [1, 0, 1, 0, 1, 0],
    "all labelled": [1, 1, 1, 1, 1, 1],
}


def inputs(tag: str, b=6, d=5, requires_grad=False):
    gen = torch.Generator().manual_seed(zlib.crc32(tag.encode()))
    z1 = torch.randn(b, d, generator=gen, dtype=torch.float64, requires_grad=requires_grad)
    z2 = torch.randn(b, d, generator=gen, dtype=torch.float64, requires_grad=requires_grad)
    return z1, z2


@pytest.mark.parametrize("kind", CONTRASTIVE_LOSSES.names())
@pytest.mark.parametrize("mix", list(MIXES))
def test_matches_naive_equation(kind, mix):
    z1, z2 = inputs(f"{kind}{mix}")
    labeled = torch.tensor(MIXES[mix], dtype=torch.bool)
    got = float(build(kind)(z1, z2, labeled))
    assert got == pytest.approx(naive_loss(z1, z2, labeled, kind), abs=1e-6)


@pytest.mark.parametrize("kind", CONTRASTIVE_LOSSES.names())
def test_gradients_are_correct(kind):
    z1, z2 = inputs(f"grad{kind}", b=4, d=3, requires_grad=True)
    labeled = torch.tensor([1, 1, 0, 0], dtype=torch.bool)
    loss = build(kind)
    assert torch.autograd.gradcheck(lambda a, c: loss(a, c, labeled), (z1, z2))


@pytest.mark.parametrize("kind", CONTRASTIVE_LOSSES.names())
def test_permuting_the_batch_leaves_the_loss_unchanged(kind):
    z1, z2 = inputs(f"perm{kind}", b=10)
    labeled = torch.tensor([1, 0, 0, 1, 0, 1, 0, 0, 0, 1], dtype=torch.bool)
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(3))
    loss = build(kind)
    assert float(loss(z1, z2, labeled)) == pytest.approx(
        float(loss(z1[perm], z2[perm], labeled[perm])), abs=1e-10)


def test_limits():
    z1, z2 = inputs("limits", b=8)
    some = torch.tensor([1, 1, 1, 0, 0, 0, 0, 0], dtype=torch.bool)
    none = torch.zeros(8, dtype=torch.bool)

    def close(a, b):
        return float(a) == pytest.approx(float(b), abs=1e-10)

    assert close(MCL(TAU, mcl_lambda=0.0)(z1, z2, some), SSCL(TAU)(z1, z2, some))
    assert close(MCL(TAU, mcl_lambda=1.0)(z1, z2, some), SCLPU(TAU)(z1, z2, some))
    assert close(PUNCE(TAU, pi=0.0)(z1, z2, some), PUCL(TAU)(z1, z2, some))
    assert close(PUCL(TAU)(z1, z2, none), SSCL(TAU)(z1, z2, none))
    assert close(PUNCE(TAU, pi=0.7)(z1, z2, none), SSCL(TAU)(z1, z2, none))
    # DCL at pi = 0: Ng is the plain sum over negatives (each e^{s} >= e^{-1/tau}, so the
    # clamp is inactive), and -log(e^{s_ia} / (e^{s_ia} + Ng)) is SimCLR's loss itself.
    assert close(DCL(TAU, pi=0.0)(z1, z2, some), SSCL(TAU)(z1, z2, some))
    assert not close(PUCL(TAU)(z1, z2, some), SSCL(TAU)(z1, z2, some))


def test_dcl_clamp_engages_for_a_large_prior():
    z = torch.randn(6, 4, dtype=torch.float64)
    labeled = torch.zeros(6, dtype=torch.bool)
    value = DCL(TAU, pi=0.95)(z, z + 1e-3, labeled)  # near-identical views: huge e^{s_ia}
    assert torch.isfinite(value)
    assert float(value) == pytest.approx(naive_loss(z, z + 1e-3, labeled, "dcl", pi=0.95),
                                         abs=1e-6)


def test_large_similarities_stay_finite():
    """tau = 0.01 gives logits of +-100: log-space computation must not overflow."""
    z = torch.randn(16, 8)
    labeled = torch.zeros(16, dtype=torch.bool)
    labeled[:4] = True
    for kind in CONTRASTIVE_LOSSES.names():
        params = {} if kind.startswith("balanced") else {"temperature": 0.01}
        assert torch.isfinite(make_loss(kind, **params)(z, z + 1e-3 * torch.randn_like(z),
                                                        labeled)), kind


def test_invalid_names_and_params_are_refused():
    with pytest.raises(ValueError, match="allowed: balanced, balanced_pucl, dcl"):
        make_loss("simclr")
    with pytest.raises(ValueError, match="temperature must be > 0"):
        make_loss("pucl", temperature=0.0)
    with pytest.raises(ValueError, match="pi must be in"):
        make_loss("punce", pi=1.0)
    with pytest.raises(ValueError, match="invalid params for loss 'sscl'"):
        make_loss("sscl", nonneg="relu")  # retired: no such setting
    with pytest.raises(ValueError, match="invalid params for loss 'sscl'"):
        make_loss("sscl", pi=0.3)
    with pytest.raises(ValueError, match="is_labeled"):
        PUCL()(torch.randn(4, 3), torch.randn(4, 3), torch.ones(3, dtype=torch.bool))
