"""Contrastive PU learning as one scikit-learn classifier, for images and tabular features.

    clf = PUClassifier(epochs=20).fit(X, s)    # s: 1 = labelled positive, 0 = unlabeled
    clf.predict(X_new)                          # 0 / 1, the true class (not s)
    clf.predict_proba(X_new)[:, 1]              # P(y = 1 | x)

`fit` runs what the pipeline's stages run, in memory: the class prior of the unlabeled
rows (an estimator of PRIOR_ESTIMATORS, or a given number), contrastive pretraining of an
encoder with a loss of CONTRASTIVE_LOSSES (PUCL by default), then a linear head on the
frozen encoder features, trained with the nnPU risk (default) or with cross-entropy on
PUPL's pseudo-labels, its scores optionally smoothed over the nearest training rows
(`neighbours`). It reads no file and logs nothing.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from pucl.classify.linear import LinearSettings, train_linear_head, train_pu_head
from pucl.classify.neighbours import NeighbourHead
from pucl.data.augment import make_augment
from pucl.features import embed, scoring_views
from pucl.losses import CONTRASTIVE_LOSSES, make_loss
from pucl.models import ENCODERS, ContrastiveModel
from pucl.pretraining import PRETRAINING_METHODS, PretrainJob
from pucl.prior import PRIOR_ESTIMATORS
from pucl.pupl import PSEUDO_LABELLERS
from pucl.runtime import seeded_generator

# The pipeline's default augmentations (params.yaml pretrain.augment): label-preserving
# for digits; pass `augment={"hflip": 0.5}` for clothes or natural images.
DEFAULT_AUGMENT = {"degrees": 10.0, "translate": 0.1, "scale_min": 0.9, "scale_max": 1.1,
                   "brightness": 0.2, "contrast": 0.2, "hflip": 0.0, "feature_noise": 0.1,
                   "feature_drop": 0.1}
OBJECTIVES = ("nnpu", "upu", "pupl_ce")


class PUClassifier(ClassifierMixin, BaseEstimator):
    """A binary classifier learned from labelled positives and unlabeled rows.

    Parameters
    ----------
    prior : str or float, default="tedn"
        A prior estimator's name (`pucl.prior.PRIOR_ESTIMATORS.names()`) or the class
        prior of the unlabeled rows, a number in (0, 1).
    loss : str, default="pucl"
        The contrastive objective (`pucl.losses.CONTRASTIVE_LOSSES.names()`).
    encoder : str, default="auto"
        An encoder's name (`pucl.models.ENCODERS.names()`: lenet5, lenet5_wide, cnn7,
        ...); auto picks mlp for 2-d X (tabular), lenet5 for 28 x 28 images and cnn7 for
        other images.
    epochs : int, default=20
        Pretraining epochs; 0 keeps the randomly initialised encoder.
    objective : {"nnpu", "upu", "pupl_ce"}, default="nnpu"
        How the head learns: a PU risk with the prior, or cross-entropy on PUPL's labels.
    neighbours : int, default=0
        k > 0: a row's score is the mean of the head's score for it and for its k nearest
        training rows (cosine similarity of encoder features); the training features are
        kept for this. 0: the head's own score.
    mirror : bool, default=False
        Images only: a row's score is the mean of its score and its left-right mirror
        image's (`evaluate.tta: hflip` in the pipeline), for classes a mirror keeps.
    shift : int, default=0
        Images only: s > 0 also averages each view's scores over its 8 translations by s
        pixels (`evaluate.tta_shift` in the pipeline).
    members : int, default=1
        m > 1: m encoders, pretrained with seeds random_state, +1, ..., each with its own
        head; a row's score is the mean of theirs (`pretrain.members` in the pipeline).
    threshold : float, default=0.5
        `predict` says positive when P(y = 1 | x) >= threshold.
    random_state : int, default=0
        Seeds every random choice (weights, batches, augmentations, subsamples).

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        The two labels of y ([0, 1] for PU labels); predictions use them.
    prior_ : float
        The class prior used (estimated, or the given number).
    model_, head_ : torch modules
        The encoder with its projection head, and the head on encoder features (linear, or
        a `NeighbourHead` around it when neighbours > 0); with members > 1, the first's.
    members_ : list of (model, head)
        Every member's encoder and head (one pair when members = 1).
    """

    members = 1  # what estimators pickled before the parameter existed hold
    shift = 0

    def __init__(self, prior: str | float = "tedn", loss: str = "pucl", encoder: str = "auto",
                 epochs: int = 20, batch_size: int = 512, lr: float = 2e-3,
                 weight_decay: float = 1e-5, temperature: float = 0.5, proj_dim: int = 128,
                 proj_hidden: int = 256, augment: dict | None = None,
                 objective: str = "nnpu", head_epochs: int = 100, head_lr: float = 1e-2,
                 neighbours: int = 0, mirror: bool = False, shift: int = 0, members: int = 1,
                 threshold: float = 0.5, random_state: int = 0, progress: bool = False):
        self.prior = prior
        self.loss = loss
        self.encoder = encoder
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.temperature = temperature
        self.proj_dim = proj_dim
        self.proj_hidden = proj_hidden
        self.augment = augment
        self.objective = objective
        self.head_epochs = head_epochs
        self.head_lr = head_lr
        self.neighbours = neighbours
        self.mirror = mirror
        self.shift = shift
        self.members = members
        self.threshold = threshold
        self.random_state = random_state
        self.progress = progress

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # PU labels are binary by definition
        tags.input_tags.allow_nan = False
        return tags

    # -- validation ----------------------------------------------------------------------

    def _check_params(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got "
                             f"{self.objective!r}")
        if self.loss not in CONTRASTIVE_LOSSES:
            raise ValueError(f"loss must be one of {', '.join(CONTRASTIVE_LOSSES)}, got "
                             f"{self.loss!r}")
        if self.encoder != "auto" and self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be auto or one of {', '.join(ENCODERS)}, got "
                             f"{self.encoder!r}")
        if isinstance(self.prior, str):
            if self.prior not in PRIOR_ESTIMATORS:
                raise ValueError(f"prior must be a number in (0, 1) or one of "
                                 f"{', '.join(PRIOR_ESTIMATORS)}, got {self.prior!r}")
        elif not 0.0 < float(self.prior) < 1.0:
            raise ValueError(f"prior must be in (0, 1), got {self.prior}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if not isinstance(self.neighbours, (int, np.integer)) or self.neighbours < 0:
            raise ValueError(f"neighbours must be an integer >= 0, got {self.neighbours!r}")
        if not isinstance(self.shift, (int, np.integer)) or not 0 <= self.shift <= 4:
            raise ValueError(f"shift must be an integer from 0 to 4, got {self.shift!r}")
        if not isinstance(self.members, (int, np.integer)) or self.members < 1:
            raise ValueError(f"members must be an integer >= 1, got {self.members!r}")
        if self.epochs < 0 or self.head_epochs < 1:
            raise ValueError(f"epochs must be >= 0 and head_epochs >= 1, got {self.epochs}, "
                             f"{self.head_epochs}")

    def _inputs(self, X: Any, reset: bool) -> np.ndarray:
        """float32 [n, d] features or [n, c, h, w] images (uint8 pixels kept as uint8)."""
        arr = np.asarray(X) if not hasattr(X, "iloc") else X
        if getattr(arr, "ndim", 2) == 4:
            arr = validate_data(self, arr, reset=reset, allow_nd=True, ensure_2d=False,
                                dtype=None)
            if arr.dtype != np.uint8:
                arr = arr.astype(np.float32)
            return np.ascontiguousarray(arr)  # views such as x[..., ::-1] included
        arr = validate_data(self, X, reset=reset, dtype=[np.float32, np.float64],
                            ensure_min_samples=4 if reset else 1)
        return np.ascontiguousarray(arr, dtype=np.float32)

    @staticmethod
    def _pu_labels(y: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(classes_, s): the two labels seen, and 1 where y is the greater one (the
        labelled positives), 0 elsewhere (the unlabeled rows)."""
        if y is None:
            raise ValueError("PUClassifier requires y to be passed, but the target y is None "
                             "(y: the PU labels, 1 = labelled positive, 0 = unlabeled)")
        y = column_or_1d(y, warn=True)
        if len(y) != n:
            raise ValueError(f"y must hold one PU label per row of X ({n}), got {len(y)}")
        kind = type_of_target(y)
        if kind == "multiclass":
            raise ValueError("Only binary classification is supported: y must hold PU labels, "
                             "1 = labelled positive and 0 = unlabeled, got "
                             f"{len(np.unique(y))} values")
        if kind not in ("binary", "unknown"):
            raise ValueError(f"y must hold binary PU labels (1 = labelled positive, 0 = "
                             f"unlabeled), got a {kind} target")
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(f"y holds one class only ({classes[0]!r}): PU learning needs "
                             "labelled positives (1) and unlabeled rows (0)")
        s = (y == classes[1]).astype(np.int64)
        if s.sum() < 2 or (s == 0).sum() < 2:
            raise ValueError(f"y needs at least 2 labelled positives and 2 unlabeled rows of "
                             f"each class, got {int(s.sum())} and {int((s == 0).sum())}")
        return classes, s

    # -- learning ------------------------------------------------------------------------

    def fit(self, X: Any, y: Any) -> PUClassifier:
        """X: images [n, c, h, w] (uint8, or floats in [0, 1]) or features [n, d]; y: the PU
        labels s, 1 = labelled positive and 0 = unlabeled (of two other labels, the greater
        marks the labelled positives, as scikit-learn's pos_label)."""
        self._check_params()
        x = self._inputs(X, reset=True)
        self.classes_, s = self._pu_labels(y, len(x))
        if self.mirror and x.ndim != 4:
            raise ValueError(f"mirror=True averages each image with its mirror image, but X "
                             f"has feature rows of shape {list(x.shape[1:])} (allowed for "
                             "feature rows: False)")
        if self.shift and x.ndim != 4:
            raise ValueError(f"shift={self.shift} translates images, but X has feature rows "
                             f"of shape {list(x.shape[1:])} (allowed for feature rows: 0)")
        if self.neighbours > len(x):
            raise ValueError(f"neighbours = {self.neighbours} exceeds the {len(x)} training "
                             f"rows (allowed: 0 to {len(x)})")
        labeled = s == 1
        self.prior_ = self._estimate_prior(x, labeled)
        self.members_ = [self._fit_member(x, s, self.random_state + k)
                         for k in range(self.members)]
        self.model_, self.head_ = self.members_[0]
        return self

    def _fit_member(self, x: np.ndarray, s: np.ndarray, seed: int
                    ) -> tuple[ContrastiveModel, torch.nn.Module]:
        """One encoder (pretrained with `seed`) and its head; the first member's PUPL
        labels are kept as pseudo_labels_."""
        labeled = s == 1
        torch.manual_seed(seed)
        tabular = x.ndim == 2
        name = self.encoder if self.encoder != "auto" else (
            "mlp" if tabular else "lenet5" if x.shape[-2:] == (28, 28) else "cnn7")
        model = ContrastiveModel(name, tuple(x.shape[1:]), self.proj_hidden, self.proj_dim)
        generator = seeded_generator(seed)
        if self.epochs > 0:
            self._pretrain(model, x, labeled, tabular, generator)
        features = embed(model, x, "encoder")
        settings = LinearSettings(self.head_epochs, self.head_lr, 1e-4, 256)
        if self.objective == "pupl_ce":
            labeller = PSEUDO_LABELLERS.create("auto", prior=self.prior_, random_state=seed)
            labels = labeller.fit_predict(embed(model, x, "projector"), s)
            if seed == self.random_state:
                self.pseudo_labels_ = labels
            head, _ = train_linear_head(features, labels, settings, generator,
                                        progress=self.progress)
        else:
            head, _ = train_pu_head(features[labeled], features[~labeled], self.prior_,
                                    self.objective, settings, generator, self.progress)
        if self.neighbours:
            head = NeighbourHead(head, torch.from_numpy(features), self.neighbours)
        return model.eval(), head.eval()

    def _estimate_prior(self, x: np.ndarray, labeled: np.ndarray) -> float:
        if not isinstance(self.prior, str):
            return float(self.prior)
        scaled = x / 255.0 if x.dtype == np.uint8 else x
        estimator = PRIOR_ESTIMATORS.create(self.prior, random_state=self.random_state)
        prior = estimator.fit(scaled[~labeled], scaled[labeled]).prior_
        # a PU risk needs 0 < prior < 1; an estimate at the boundary means "almost none"
        return float(np.clip(prior, 1e-3, 1.0 - 1e-3))

    def _pretrain(self, model: ContrastiveModel, x: np.ndarray, labeled: np.ndarray,
                  tabular: bool, generator: torch.Generator) -> None:
        extra = {"pi": self.prior_} if self.loss in CONTRASTIVE_LOSSES.names(
            tag="needs_prior") else {}
        loss_fn = make_loss(self.loss, temperature=self.temperature, **extra)
        augment = make_augment(SimpleNamespace(**{**DEFAULT_AUGMENT, **(self.augment or {})}),
                               tabular)
        job = PretrainJob(model, loss_fn, torch.from_numpy(x), torch.from_numpy(labeled),
                          augment, self.epochs, self.batch_size, self.lr, self.weight_decay,
                          self.proj_dim, self.proj_hidden, self.prior_, generator,
                          torch.device("cpu"), progress=self.progress)
        PRETRAINING_METHODS.create("contrastive").train(job)

    # -- prediction ----------------------------------------------------------------------

    def predict_proba(self, X: Any) -> np.ndarray:
        """[P(y = 0 | x), P(y = 1 | x)] per row."""
        check_is_fitted(self, "head_")
        x = self._inputs(X, reset=False)
        members = getattr(self, "members_", [(self.model_, self.head_)])  # pickled before
        # views outermost: each view is made once and dropped after every member scored it
        positive = np.mean([[head.positive_score(embed(model, v, "encoder"))
                             for model, head in members]
                            for v in scoring_views(x, self.mirror, self.shift)],
                           axis=(0, 1)).astype(np.float64)
        return np.column_stack([1.0 - positive, positive])

    def decision_function(self, X: Any) -> np.ndarray:
        """log P(y = 1 | x) - log P(y = 0 | x): positive where the head leans positive."""
        proba = np.clip(self.predict_proba(X), 1e-12, 1.0)
        return np.log(proba[:, 1]) - np.log(proba[:, 0])

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "head_")
        return self.classes_[(self.predict_proba(X)[:, 1] >= self.threshold).astype(int)]
