"""Held-out scores of a positive-vs-unlabeled classifier, the quantity BBE and DEDPUL read.

A classifier that learns to tell the labelled positives P from the unlabeled rows U (a
"non-traditional classifier": it never sees a negative label) ranks U by how positive each
row looks. Scores of rows the classifier was trained on are biased (it remembers the 500
or so positives it saw), so every row is scored by a model that did not see it: the rows
of each side are dealt into `folds` folds and fold k is scored by a classifier trained on
the others. A network stops training where its balanced P-vs-U loss on a validation slice
of its own training part is lowest; the held-out fold plays no part in that choice.

Settings: params.yaml `prior.heldout` (shared by bbe, dedpul and tedn).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import Field
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from torch import nn

from pucl.models.encoders import LeNet5, MLPEncoder
from pucl.prior.base import PriorEstimator
from pucl.prior.bins import best_bin
from pucl.registry import EntryParams
from pucl.runtime.device import adam, descend, from_host
from pucl.runtime.progress import EpochBar
from pucl.runtime.step_graph import GraphedStep


class HeldOutParams(EntryParams):
    """The P-vs-U classifier and the estimators reading its held-out scores."""

    classifier: Literal["auto", "network", "logistic"] = Field(
        "auto", description="auto: a small CNN for images of 20x20 or more, else logistic")
    folds: int = Field(2, ge=2, le=10, description="cross-fitting folds per side")
    restarts: int = Field(1, ge=1, le=20, description="whole estimates, each with its own "
                          "folds and networks (the first with the run's seed), averaged: "
                          "steadier, at that many times the cost")
    validation: float = Field(0.2, gt=0.0, lt=0.5, description="share of each training "
                              "part that decides when the network stops")
    batch_size: int = Field(256, ge=8, description="network: rows of P and of U per step")
    max_steps: int = Field(1500, ge=1, description="network: optimiser steps per fold at most")
    eval_every: int = Field(50, ge=1, description="network: steps between validation checks")
    patience: int = Field(4, ge=1, description="network: checks without improvement to stop")
    lr: float = Field(1e-3, gt=0.0)
    weight_decay: float = Field(1e-4, ge=0.0)
    shift: int = Field(2, ge=0, description="network: random translation in pixels")
    cvir_rounds: int = Field(3, ge=0, description="tedn, network: CVIR rounds after the "
                             "early-stopped fit; each drops the top BBE-estimate share of U "
                             "from the negatives, then trains on (tedn.py)")
    cvir_epochs: int = Field(1, ge=1, description="tedn: epochs per round (steps of a pass "
                             "over U, batches drawn from the rows kept)")
    pca_dim: int = Field(50, ge=1, description="logistic: principal components it sees")
    C: float = Field(1.0, gt=0.0, description="logistic: inverse L2 strength")
    # BBE (bbe.py): the slack and confidence of the upper bound. gamma is the paper's;
    # delta 0.5, not its 0.1: a smaller slack picks a purer top bin, and BBE's bin, which
    # holds some negatives, errs high. TED^n's mean absolute error fell on each of the
    # five cases of reports/prior (delta/, seeds 5-9: 0.0175 -> 0.0131 on average)
    gamma: float = Field(0.01, ge=0.0)
    delta: float = Field(0.5, gt=0.0, lt=1.0)
    # DEDPUL (dedpul.py)
    bandwidth_u: float = Field(0.05, gt=0.0, description="dedpul: KDE bandwidth of U's "
                               "scores, in standard deviations of those scores")
    bandwidth_p: float = Field(0.1, gt=0.0, description="dedpul: the same for P's scores")
    bootstrap: int = Field(100, ge=0, le=2000, description="resamples of the held-out scores "
                           "(each fold's rows drawn with replacement) that measure the "
                           "estimate's spread, prior_std; 0: none")


@dataclass(frozen=True)
class HeldOutScores:
    """Scores (higher: more positive-like; network logits or logistic decision values) of
    every row of U and P, each from the fold model that did not see it."""

    u: np.ndarray
    p: np.ndarray
    fold_u: np.ndarray
    fold_p: np.ndarray
    classifier: str
    steps: tuple[int, ...]  # network: the step each fold's model was taken at (0: logistic)
    cvir_alphas: tuple[tuple[float, ...], ...] = ()  # per fold, each CVIR round's alpha
    # per row of P, the row of U that is the same sample (case-control U holds the
    # labelled positives), -1 where none; the bootstrap draws the two together
    copy_in_u: np.ndarray | None = None

    @property
    def folds(self) -> int:
        return int(self.fold_u.max()) + 1

    def describe(self) -> dict[str, Any]:
        return {"heldout_classifier": self.classifier, "heldout_folds": self.folds,
                "heldout_steps": list(self.steps), "heldout_n_u": len(self.u),
                "heldout_n_p": len(self.p),
                **({"heldout_cvir_alphas": [[round(a, 6) for a in fold]
                                            for fold in self.cvir_alphas]}
                   if any(self.cvir_alphas) else {})}


ROWS_PER_FOLD = 5  # per side: a fold model learns from 4 (folds - 1) and checks on 1


def minimum_rows(folds: int) -> int:
    """Rows a side needs for every fold's training part and validation slice."""
    return ROWS_PER_FOLD * folds


def _deal(n: int, folds: int, rng: np.random.Generator) -> np.ndarray:
    fold = np.empty(n, dtype=np.int64)
    fold[rng.permutation(n)] = np.arange(n) % folds
    return fold


def _deal_u_with_p(U: np.ndarray, P: np.ndarray, fold_p: np.ndarray, folds: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Folds of U in which a row equal to a labelled positive (case-control U holds them)
    shares that positive's fold: a model that learnt it as P never scores it as U. Also,
    per row of P, the row of U it equals (-1: none)."""
    fold_u = _deal(len(U), folds, rng)
    row_of = {row.tobytes(): j for j, row in enumerate(P)}
    copy_in_u = np.full(len(P), -1, dtype=np.int64)
    for i, row in enumerate(U):
        j = row_of.get(row.tobytes())
        if j is not None:
            fold_u[i] = fold_p[j]
            copy_in_u[j] = i
    return fold_u, copy_in_u


def _lenet_sized(sample_shape: tuple[int, ...]) -> bool:
    """Images (c, h, w) large enough for LeNet-5's two 5x5 convolutions."""
    return len(sample_shape) == 3 and min(sample_shape[1:]) >= 20


def classifier_kind(choice: str, sample_shape: tuple[int, ...]) -> str:
    if choice != "auto":
        return choice
    return "network" if _lenet_sized(sample_shape) else "logistic"


def resampled(scores: HeldOutScores, rng: np.random.Generator) -> HeldOutScores:
    """One bootstrap draw of the scores that keeps every fold's size: each fold's rows of
    P drawn with replacement, and its rows of U too, except that a positive's copy in U
    (case-control) comes with the positive. Drawn apart, the two would lose the
    correlation they share, and the spread would read about twice too wide (MNIST-5k)."""
    copy = (scores.copy_in_u if scores.copy_in_u is not None
            else np.full(len(scores.p), -1, dtype=np.int64))
    is_copy = np.zeros(len(scores.u), dtype=bool)
    is_copy[copy[copy >= 0]] = True
    ip, iu = [], []
    for k in range(scores.folds):
        in_p = np.flatnonzero(scores.fold_p == k)
        drawn_p = rng.choice(in_p, len(in_p))
        rest = np.flatnonzero((scores.fold_u == k) & ~is_copy)
        copies = copy[drawn_p]
        ip.append(drawn_p)
        iu += [copies[copies >= 0], rng.choice(rest, len(rest)) if len(rest) else rest]
    ip, iu = np.concatenate(ip), np.concatenate(iu)
    return replace(scores, u=scores.u[iu], p=scores.p[ip], fold_u=scores.fold_u[iu],
                   fold_p=scores.fold_p[ip], copy_in_u=None)


def restart_states(random_state: int | None, restarts: int) -> list[int | None]:
    """The seed of each restart: the run's own first (one restart is the estimate without
    restarts), then seeds drawn from it."""
    if random_state is None:
        return [None] * restarts
    drawn = np.random.SeedSequence(random_state).generate_state(restarts - 1)
    return [random_state, *(int(state) for state in drawn)]


def heldout_scores(U: np.ndarray, P: np.ndarray, sample_shape: tuple[int, ...],
                   settings: HeldOutParams, random_state: int | None = 0,
                   progress: bool = False, cvir: bool = False,
                   device: str | torch.device = "cpu") -> HeldOutScores:
    """Cross-fitted P-vs-U scores of float rows U [n_u, d] and P [n_p, d]; `sample_shape`
    is one row's original shape ((c, h, w) for images). `cvir`: network fold models go on
    with `settings.cvir_rounds` CVIR rounds (TED^n) after their early-stopped fit. The
    network trains on `device`; its batches are drawn by the numpy generator as on the
    CPU, and only their indices travel."""
    need = minimum_rows(settings.folds)
    if len(U) < need or len(P) < need:
        raise ValueError(f"{settings.folds}-fold held-out scores need at least {need} rows "
                         f"per side, got {len(U)} unlabeled and {len(P)} positive")
    rng = np.random.default_rng(random_state)
    fold_p = _deal(len(P), settings.folds, rng)
    fold_u, copy_in_u = _deal_u_with_p(U, P, fold_p, settings.folds, rng)
    kind = classifier_kind(settings.classifier, tuple(sample_shape))
    scores_u, scores_p = np.empty(len(U)), np.empty(len(P))
    steps, alphas = [], []
    for k in EpochBar(settings.folds, f"prior: P-vs-U {kind}", disable=not progress,
                      unit="fold"):
        train_u, train_p = U[fold_u != k], P[fold_p != k]
        if kind == "logistic":
            score = _fit_logistic(train_u, train_p, settings)
            steps.append(0)
            alphas.append(())
        else:
            score, step, fold_alphas = _fit_network(train_u, train_p, tuple(sample_shape),
                                                    settings, rng, cvir, torch.device(device))
            steps.append(step)
            alphas.append(tuple(fold_alphas))
        scores_u[fold_u == k] = score(U[fold_u == k])
        scores_p[fold_p == k] = score(P[fold_p == k])
    # a positive and its copy in U are one sample: one score. Scored in other batches,
    # they can differ in the last bits, and which way the tie breaks would then hang on
    # the thread count (seen in the bootstrap's spread between two processes)
    copied = copy_in_u >= 0
    scores_u[copy_in_u[copied]] = scores_p[copied]
    return HeldOutScores(scores_u, scores_p, fold_u, fold_p, kind, tuple(steps),
                         tuple(alphas), copy_in_u)


def _fit_logistic(U: np.ndarray, P: np.ndarray, settings: HeldOutParams):
    x = np.concatenate([P, U])
    y = np.r_[np.ones(len(P)), np.zeros(len(U))]
    dim = min(settings.pca_dim, x.shape[1], len(x))
    reduce = PCA(n_components=dim, random_state=0).fit(x)
    scale = StandardScaler().fit(reduce.transform(x))
    model = LogisticRegression(C=settings.C, class_weight="balanced", max_iter=2000)
    model.fit(scale.transform(reduce.transform(x)), y)
    return lambda rows: model.decision_function(scale.transform(reduce.transform(rows)))


def _network(sample_shape: tuple[int, ...]) -> nn.Module:
    if _lenet_sized(sample_shape):
        body = LeNet5(sample_shape)
    else:
        body = MLPEncoder(sample_shape, hidden=128, out_dim=64)
    return nn.Sequential(body, nn.Linear(body.out_dim, 1))


def _split_off(n: int, share: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(n)
    held = max(1, round(share * n))
    return order[held:], order[:held]


def _balanced_loss(logit_p: torch.Tensor, logit_u: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of P as 1 and U as 0, each side weighted one half."""
    return 0.5 * F.softplus(-logit_p).mean() + 0.5 * F.softplus(logit_u).mean()


def _fit_network(U: np.ndarray, P: np.ndarray, sample_shape: tuple[int, ...],
                 settings: HeldOutParams, rng: np.random.Generator, cvir: bool = False,
                 device: str | torch.device = "cpu"):
    torch.manual_seed(int(rng.integers(2**31)))
    fit_u, val_u = _split_off(len(U), settings.validation, rng)
    fit_p, val_p = _split_off(len(P), settings.validation, rng)
    shape = (-1, *sample_shape)

    def tensor(rows: np.ndarray | torch.Tensor) -> torch.Tensor:
        if isinstance(rows, torch.Tensor):
            return rows
        return torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32)).reshape(
            shape).to(device)

    def logits(model: nn.Module, rows: np.ndarray | torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return torch.cat([model(tensor(rows[i:i + 4096])).squeeze(1).float()
                              for i in range(0, len(rows), 4096)])

    # the rows live where the network trains: a step sends only its indices
    rows_p, rows_u = tensor(P), tensor(U)
    val_p, val_u = rows_p[val_p], rows_u[val_u]

    model = _network(sample_shape).to(device)
    optimiser = adam(model.parameters(), settings.lr, settings.weight_decay)
    step_on = _learner(model, optimiser, rows_p, rows_u,
                       settings.shift if len(sample_shape) == 3 else 0, rng)
    best = (math.inf, 0, copy.deepcopy(model.state_dict()))
    order, cursor, stale = rng.permutation(fit_u), 0, 0
    for step in range(1, settings.max_steps + 1):
        if cursor + settings.batch_size > len(order):
            order, cursor = rng.permutation(fit_u), 0
        batch_u = order[cursor:cursor + settings.batch_size]
        cursor += len(batch_u)
        batch_p = fit_p[rng.integers(0, len(fit_p), len(batch_u))]
        step_on(batch_p, batch_u)
        if step % settings.eval_every == 0 or step == settings.max_steps:
            model.eval()  # early stopping reads the validation loss back: every eval_every steps
            val = float(_balanced_loss(logits(model, val_p), logits(model, val_u)))
            if val < best[0]:
                best, stale = (val, step, copy.deepcopy(model.state_dict())), 0
            else:
                stale += 1
                if stale >= settings.patience:
                    break
    model.load_state_dict(best[2])
    alphas = _cvir(model, fit_p, fit_u, val_p, val_u, rows_u, step_on, logits, settings,
                   rng) if cvir else []
    model.eval()
    return (lambda rows: logits(model, rows).cpu().numpy().astype(np.float64)), best[1], alphas


def roll_index(size: int, by: int) -> np.ndarray:
    """Where each position takes its value from when an axis of `size` is rolled `by`
    places (torch.roll's result as a gather: position i takes (i - by) mod size)."""
    return (np.arange(size) - by) % size


def _learner(model: nn.Module, optimiser: torch.optim.Optimizer, rows_p: torch.Tensor,
             rows_u: torch.Tensor, shift: int, rng: np.random.Generator):
    """step_on(idx_p, idx_u): one optimiser step of the balanced loss on P rows idx_p and
    U rows idx_u (host indices, drawn by numpy as on the CPU; only they travel). With
    `shift`, the batch is rolled by one random translation per step (cheap, and P is
    small), as index tensors, so that the step is one CUDA graph on a GPU."""

    @GraphedStep
    def learn(idx_p: torch.Tensor, idx_u: torch.Tensor, *roll: torch.Tensor) -> torch.Tensor:
        x = torch.cat([rows_p[idx_p], rows_u[idx_u]])
        if roll:  # torch.roll by (dy, dx), as two gathers
            x = x.index_select(2, roll[0]).index_select(3, roll[1])
        out = model(x).squeeze(1).float()
        loss = _balanced_loss(out[:len(idx_p)], out[len(idx_p):])
        descend(optimiser, loss)
        return loss.detach()

    def step_on(idx_p: np.ndarray, idx_u: np.ndarray) -> None:
        roll = ()
        if shift:
            dy, dx = rng.integers(-shift, shift + 1, 2)
            h, w = rows_p.shape[2:]
            roll = (from_host(roll_index(h, dy), rows_p.device),
                    from_host(roll_index(w, dx), rows_p.device))
        model.train()
        learn(from_host(idx_p, rows_p.device), from_host(idx_u, rows_u.device), *roll)

    return step_on


def _cvir(model: nn.Module, fit_p: np.ndarray, fit_u: np.ndarray, val_p: torch.Tensor,
          val_u: torch.Tensor, rows_u: torch.Tensor, step_on, logits,
          settings: HeldOutParams, rng: np.random.Generator) -> list[float]:
    """CVIR rounds of TED^n (Garg et al. 2021; bbe.py): BBE on the validation slice gives a
    prior alpha; the alpha share of U the model scores most positive is left out of the
    negatives, and the model trains on P against the rest. A U that holds positives makes
    a P-vs-U classifier hedge on them; without them it separates the classes better, and
    BBE's top bin gets purer. A round is `cvir_epochs` epochs of U's size, each batch
    drawn from the kept rows. P and U are the rows `fit_p` and `fit_u` (indices into
    `step_on(idx_p, idx_u)`'s rows). Returns each round's alpha."""
    alphas = []
    for _ in range(settings.cvir_rounds):
        model.eval()
        alpha = best_bin(logits(model, val_p).cpu().numpy(), logits(model, val_u).cpu().numpy(),
                         settings.gamma, settings.delta)[0]
        alphas.append(float(alpha))
        ranked = np.argsort(logits(model, rows_u[from_host(fit_u, rows_u.device)])
                            .cpu().numpy(), kind="stable")
        keep = ranked[:len(fit_u) - int(alpha * len(fit_u))]
        if len(keep) < 2:  # U all positive by this estimate: nothing to learn from
            break
        size = min(settings.batch_size, len(keep))
        # an epoch counts the steps of a pass over all of U, as the paper's loader does
        for _ in range(math.ceil(settings.cvir_epochs * len(fit_u) / settings.batch_size)):
            batch_u = keep[rng.choice(len(keep), size, replace=False)]
            batch_p = rng.integers(0, len(fit_p), size)
            step_on(fit_p[batch_p], fit_u[batch_u])
    return alphas


class HeldOutEstimator(PriorEstimator):
    """Base of the estimators that read held-out P-vs-U scores (bbe, dedpul,
    tedn): their settings are HeldOutParams' fields (the same defaults:
    tests/test_prior_heldout.py); subclasses implement `_from_scores(scores) -> (prior,
    details)` and say whether their scorer goes on with CVIR rounds (`cvir`)."""

    cvir = False
    averaged_details: tuple[str, ...] = ()  # other estimates in the details, averaged too
    max_bootstrap: int | None = None  # at most this many draws (a costly estimate; None: all)

    def __init__(self, classifier: str = "auto", folds: int = 2, restarts: int = 1,
                 validation: float = 0.2,
                 batch_size: int = 256, max_steps: int = 1500, eval_every: int = 50,
                 patience: int = 4, lr: float = 1e-3, weight_decay: float = 1e-4,
                 shift: int = 2, cvir_rounds: int = 3, cvir_epochs: int = 1,
                 pca_dim: int = 50, C: float = 1.0, gamma: float = 0.01,
                 delta: float = 0.5, bandwidth_u: float = 0.05, bandwidth_p: float = 0.1,
                 bootstrap: int = 100, random_state: int | None = 0, progress: bool = False,
                 device: str = "cpu"):
        self.classifier = classifier
        self.folds = folds
        self.restarts = restarts
        self.validation = validation
        self.batch_size = batch_size
        self.max_steps = max_steps
        self.eval_every = eval_every
        self.patience = patience
        self.lr = lr
        self.weight_decay = weight_decay
        self.shift = shift
        self.cvir_rounds = cvir_rounds
        self.cvir_epochs = cvir_epochs
        self.pca_dim = pca_dim
        self.C = C
        self.gamma = gamma
        self.delta = delta
        self.bandwidth_u = bandwidth_u
        self.bandwidth_p = bandwidth_p
        self.bootstrap = bootstrap
        self.random_state = random_state
        self.progress = progress
        self.device = device  # where the P-vs-U network trains (base.device)

    @property
    def min_samples(self) -> int:  # per side
        return minimum_rows(self.folds)

    def size_hint(self) -> str:
        return (f" ({ROWS_PER_FOLD} per fold of its {self.folds}-fold held-out split, "
                "prior.heldout.folds)")

    def heldout_settings(self) -> HeldOutParams:
        fields = HeldOutParams.model_fields
        return HeldOutParams(**{k: v for k, v in self.get_params().items() if k in fields})

    def _scores(self, U: np.ndarray, P: np.ndarray,
                random_state: int | None = None) -> HeldOutScores:
        return heldout_scores(U, P, self.sample_shape_, self.heldout_settings(),
                              self.random_state if random_state is None else random_state,
                              self.progress, self.cvir, self.device)

    def _estimate(self, U: np.ndarray, P: np.ndarray) -> tuple[float, dict]:
        settings = self.heldout_settings()  # refuses bad settings (restarts < 1) first
        runs = []
        for state in restart_states(self.random_state, settings.restarts):
            scores = self._scores(U, P, state)
            prior, details = self._from_scores(scores)
            runs.append({"prior": prior, **scores.describe(), **details,
                         **self._spread(scores, settings.bootstrap, state)})
        if len(runs) == 1:
            return runs[0].pop("prior"), runs[0]
        # the averaged estimates at the top; every other detail belongs to one restart,
        # so it stays in that restart's entry
        mean = {k: float(np.mean([run[k] for run in runs]))
                for k in ("prior", *self.averaged_details)}
        return mean.pop("prior"), {**mean, **restarts_spread(runs), "restarts": len(runs),
                                   "restart_estimates": runs}

    def _from_scores(self, scores: HeldOutScores) -> tuple[float, dict]:
        raise NotImplementedError

    def _point(self, scores: HeldOutScores) -> float:
        """The estimate alone, as the bootstrap reads it (subclasses skip their extras)."""
        return self._from_scores(scores)[0]

    def _spread(self, scores: HeldOutScores, draws: int, state: int | None) -> dict:
        """prior_std: the standard deviation of the estimate over `draws` bootstrap
        resamples of the held-out scores. It measures the noise of a finite P and U (the
        bins' counts), not that of the fold networks' training: restarts measure that."""
        draws = min(draws, self.max_bootstrap or draws)
        if draws == 0:
            return {}
        rng = np.random.default_rng(None if state is None else [state, 1])
        estimates = [self._point(resampled(scores, rng)) for _ in range(draws)]
        return {"prior_std": float(np.std(estimates, ddof=1)), "prior_bootstrap": draws}


def restarts_spread(runs: list[dict]) -> dict:
    """The spread of an average over restarts: each restart's bootstrap noise (the same
    rows, so it does not average away; their mean) and the restarts' own disagreement
    (network training; it does, by the square root of their number)."""
    between = float(np.std([run["prior"] for run in runs], ddof=1))
    out = {"prior_restart_std": between}
    if all("prior_std" in run for run in runs):
        within = float(np.mean([run["prior_std"] for run in runs]))
        out["prior_std"] = math.sqrt(within ** 2 + between ** 2 / len(runs))
    return out
