"""The PU classifiers pucl's tabular benchmark compares against, each written here from
its paper, independent of pucl's own code (a shared bug cannot flatter either side).

Every peer is `fit(X, s, prior, seed)` -> scores of the rows asked for, where s = 1 marks
the labelled positives and U is every row (the case-control scenario, as the benchmark's
PUClassifier runs): `prior` is U's class prior, estimated or true.

- nnpu_mlp / upu_mlp: an MLP trained on the non-negative (Kiryo et al. 2017) or unbiased
  (du Plessis et al. 2015) PU risk with the sigmoid loss.
- bagging_pu: Mordelet & Vert (2014): trees fit on P against bootstrap samples of the
  unlabeled rows of P's size; a row's score is the mean over the trees whose sample left
  it out.
- elkan_noto: Elkan & Noto (2008): a calibrated classifier of s, divided by
  c = P(s = 1 | y = 1). The paper used a Platt-scaled SVM; logistic regression, whose
  probabilities are calibrated by its loss, read higher here on every table tried
  (digits 0.835 against 0.741, breast cancer 0.860 against 0.713), so the peer uses it.

The rank-based peers (bagging) call a row positive when its score is among U's top
prior share; the others threshold their estimate of P(y = 1 | x) at 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier
from torch import nn


@dataclass
class Predictions:
    test: np.ndarray  # 0 / 1 per test row


def _mlp(d: int, hidden: int = 300, depth: int = 3) -> nn.Module:
    layers: list[nn.Module] = []
    for i in range(depth):
        layers += [nn.Linear(d if i == 0 else hidden, hidden), nn.BatchNorm1d(hidden),
                   nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(hidden, 1))


def pu_risk_mlp(x, s, x_test, prior: float, seed: int, nonnegative: bool,
                epochs: int = 100, batch: int = 256, lr: float = 1e-3,
                weight_decay: float = 5e-3) -> Predictions:
    """nnPU (nonnegative) or uPU with the sigmoid loss l(z, t) = sigmoid(-t z); the
    negative-class risk of U minus P's, clipped at 0 by nnPU's defeat step (beta 0,
    gamma 1: a batch whose negative risk goes below 0 is trained up on it)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    xt = torch.as_tensor(x, dtype=torch.float32)
    net = _mlp(x.shape[1])
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    pos, unl = np.flatnonzero(s == 1), np.arange(len(x))
    n_batches = max(1, len(unl) // batch)
    p_batch = max(1, len(pos) // n_batches)
    for _ in range(epochs):
        u_order, p_order = rng.permutation(unl), rng.permutation(pos)
        for b in range(n_batches):
            u = xt[u_order[b * batch:(b + 1) * batch]]
            p_idx = p_order[(b * p_batch) % len(pos):][:p_batch]
            p = xt[p_idx if len(p_idx) else p_order[:p_batch]]
            out = net(torch.cat([p, u])).squeeze(1)
            gp, gu = out[:len(p)], out[len(p):]
            risk_p = prior * torch.sigmoid(-gp).mean()
            risk_n = torch.sigmoid(gu).mean() - prior * torch.sigmoid(gp).mean()
            opt.zero_grad()
            if nonnegative and risk_n.item() < 0:
                (-risk_n).backward()
            else:
                (risk_p + risk_n).backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        score = net(torch.as_tensor(x_test, dtype=torch.float32)).squeeze(1).numpy()
    return Predictions((score > 0).astype(int))


def bagging_pu(x, s, x_test, prior: float, seed: int, rounds: int = 100) -> Predictions:
    """Mordelet & Vert's bagging SVM with trees: each round fits P against |P| unlabeled
    rows drawn with replacement; U's rows are scored out of bag, test rows by every tree.
    Positive: the labelled rows and U's top scores, so that the prior share of all rows
    is positive, and test rows scoring at least the last of those."""
    rng = np.random.default_rng(seed)
    pos, unl = np.flatnonzero(s == 1), np.flatnonzero(s == 0)
    oob_sum, oob_n = np.zeros(len(unl)), np.zeros(len(unl))
    test_sum = np.zeros(len(x_test))
    for r in range(rounds):
        drawn = rng.integers(0, len(unl), size=len(pos))
        tree = DecisionTreeClassifier(random_state=seed * 1000 + r)
        tree.fit(np.concatenate([x[pos], x[unl[drawn]]]),
                 np.r_[np.ones(len(pos)), np.zeros(len(drawn))])
        out = np.ones(len(unl), bool)
        out[drawn] = False
        oob_sum[out] += tree.predict_proba(x[unl[out]])[:, 1]
        oob_n[out] += 1
        test_sum += tree.predict_proba(x_test)[:, 1]
    oob = oob_sum / np.maximum(oob_n, 1)
    wanted = int(round(prior * len(x))) - len(pos)  # positives among U's rows
    wanted = min(max(wanted, 1), len(unl))
    threshold = np.sort(oob)[::-1][wanted - 1]
    return Predictions((test_sum / rounds >= threshold).astype(int))


def elkan_noto(x, s, x_test, prior: float, seed: int) -> Predictions:
    """g(x) = P(s = 1 | x) from logistic regression; P(y = 1 | x) = g(x) / c, with
    c = P(s = 1 | y = 1) = n_labelled / (prior * n) in the case-control scenario."""
    g = LogisticRegression(max_iter=1000).fit(x, s)
    c = min(1.0, s.sum() / (prior * len(x)))
    return Predictions((g.predict_proba(x_test)[:, 1] / c >= 0.5).astype(int))


PEERS = {
    "nnpu_mlp": lambda *a: pu_risk_mlp(*a, nonnegative=True),
    "upu_mlp": lambda *a: pu_risk_mlp(*a, nonnegative=False),
    "bagging_pu": bagging_pu,
    "elkan_noto": elkan_noto,
}
