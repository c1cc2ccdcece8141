"""Contrastive PU learning as one scikit-learn classifier, for images and tabular features.

    clf = PUClassifier(epochs=20).fit(X, s)    # s: 1 = labelled positive, 0 = unlabeled
    clf.predict(X_new)                          # 0 / 1, the true class (not s)
    clf.predict_proba(X_new)[:, 1]              # P(y = 1 | x)
    PUClassifier.from_preset("fmnist-i")        # a preset's recommended variant

`fit` runs the pipeline's recipe (pucl.recipe) in memory: the class prior of the
unlabeled rows, contrastive pretraining of the encoder(s), PUPL's pseudo-labels when the
objective reads them, a head per encoder (fine-tuned and smoothed as asked), and scoring
over encoders and test-time views. Every default is params.yaml's, read from one home
(pucl.recipe.settings), so on the same rows, seed and device it gives the pipeline's model. It
reads no file and logs nothing (`from_preset` reads the preset's YAML).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from pydantic import ValidationError
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from pucl.artifacts.models import build_model, describe_model
from pucl.classify.heads import describe, rebuild
from pucl.data.inputs import as_model_input
from pucl.data.split import (
    MIN_VALIDATION_ROWS,
    cap_unlabeled,
    crossfit_folds,
    given_pu_split,
    unlabeled_rows,
    validation_rows,
)
from pucl.errors import DataError, ParamsError, invalid_settings
from pucl.evaluation.label_free import validation_metrics
from pucl.io import jsonable, read_torch, write_torch
from pucl.recipe import Recipe
from pucl.recipe.crossfit import validation_plan
from pucl.recipe.prior import error_allowed, half_width
from pucl.recipe.scoring import member_scores, view_features
from pucl.recipe.sequence import fit_sequence
from pucl.recipe.settings import (
    BaseParams,
    ClassifierParams,
    EvaluateParams,
    PretrainParams,
    PriorParams,
    SplitParams,
)
from pucl.runtime.clock import StepClock
from pucl.runtime.device import resolve_device

# What `save` writes: a dict of tensors and plain values, read with torch's weights-only
# unpickler. The version moves when the layout does; `load` refuses other versions.
SAVED_FORMAT, SAVED_VERSION = "pucl.PUClassifier", 1
_PRIOR, _PRETRAIN, _CLASSIFIER, _EVALUATE = (PriorParams(), PretrainParams(),
                                              ClassifierParams(), EvaluateParams())
# The estimator's own parameters and the params.yaml setting each one is.
SETTING_OF = {
    "loss": "pretrain.loss", "encoder": "pretrain.encoder", "epochs": "pretrain.epochs",
    "batch_size": "pretrain.batch_size", "lr": "pretrain.lr",
    "weight_decay": "pretrain.weight_decay", "temperature": "pretrain.temperature",
    "proj_dim": "pretrain.proj_dim", "proj_hidden": "pretrain.proj_hidden",
    "members": "pretrain.members", "objective": "classifier.objective",
    "head_epochs": "classifier.epochs", "head_lr": "classifier.lr",
    "features": "classifier.features", "finetune_epochs": "classifier.finetune_epochs",
    "finetune_lr": "classifier.finetune_lr", "neighbours": "classifier.neighbours",
    "shift": "evaluate.tta_shift",
}
# What cross-fitting's folds refit: the classifier step, or every step of the recipe.
VALIDATION_SCOPES = ("classifier", "recipe")
# Settings with a parameter of another shape: prior (a name or a number), mirror, augment.
OWN_SHAPE = {"prior.method": "prior", "prior.value": "prior", "evaluate.tta": "mirror"}


class PUClassifier(ClassifierMixin, BaseEstimator):
    """A binary classifier learned from labelled positives and unlabeled rows.

    Every default is the pipeline's (params.yaml); `pucl methods --settings` lists the
    methods and their settings.

    Parameters
    ----------
    prior : str or float, default="tedn"
        A prior estimator's name (`pucl.prior.PRIOR_ESTIMATORS.names()`) or the class
        prior of the unlabeled rows, a number in (0, 1) (prior.method).
    loss, encoder, epochs, batch_size, lr, weight_decay, temperature, proj_dim,
    proj_hidden, members
        Pretraining (pretrain.*): the contrastive objective (`loss` auto: pucl for
        images, sscl for feature rows), the encoder (auto: mlp for feature rows, lenet5
        for greyscale images of 20 to 64 px a side, cnn7 for others), its schedule
        (`epochs` auto: 50 for images, 200 for feature rows), and
        the number of encoders (seeds random_state, +1, ...) whose scores are averaged.
    augment : dict, default=None
        Changes to the pretraining augmentations (pretrain.augment), e.g. {"hflip": 0.5}
        for clothes or natural images.
    objective, head_epochs, head_lr, features, finetune_epochs, finetune_lr, neighbours
        The classifier (classifier.*): what the head learns from (pupl_ce, nnpu, upu,
        dist_pu, dist_pu_pairs, naive_ce), its schedule, what it reads
        (encoder | trunk), end-to-end fine-tuning (0 epochs: frozen) and neighbour
        smoothing (0: off). `objective` and `finetune_epochs` default to auto, decided by
        the input (pucl.recipe.by_input), as is the head's weight decay
        (settings={"classifier.weight_decay": ...}): for feature rows a Dist-PU head
        fine-tuned 60 epochs at 5e-3, for images a PUPL cross-entropy head on the frozen encoder
        (reports/tabular).
    mirror : bool, default=False
        Images only: average each row's score with its mirror image's (evaluate.tta).
    shift : int, default=1
        Images only: also average over each view's 8 translations by this many pixels
        (evaluate.tta_shift); feature rows are scored as they are.
    scenario : {"case_control", "single_dataset"}, default="case_control"
        Which rows are unlabeled (split.scenario): case_control, every row of X (U is a
        sample of all the data, labelled positives included, as in the pipeline's
        splits); single_dataset, the rows with s = 0.
    max_unlabeled : int or None, default=100000
        U's rows at most (split.max_unlabeled): above it, fit reads a seeded uniform
        subsample of U, every labelled positive kept, so that its cost stops growing
        with the rows (reports/tabular: a million rows of 32 features in 8 minutes on 2
        CPU cores with 50 pretraining epochs, the number tables of over 50,000 rows get,
        15.5 with 100; 1.5 GB at its peak).
        None: all of U.
    settings : dict, default=None
        Any other setting, dotted as in params.yaml: {"prior.heldout.folds": 5,
        "pupl.method": "pu_kmeans", "classifier.nnpu.beta": 0.1}.
    validation_fraction : float or "auto", default=0.0
        Share of the labelled positives and of the other rows that `fit` sets aside,
        seeded, to estimate the model's accuracy, F1 and AUC from P and U alone
        (`estimates_`); no training step sees them. The pipeline's split.val_fraction,
        `auto` there (0.1, or the smallest share holding 20 labelled positives); 0 here,
        so that by default the model learns from every row given. A share that holds
        fewer than 20 labelled positives or unlabeled rows is refused.
    validation_folds : int or "auto", default=0
        Cross-fitting instead (split.folds): with K >= 2, `fit` trains the classifier once
        more per fold of the rows without that fold, so that `estimates_` reads every
        labelled positive and unlabeled row, each scored by a classifier that never saw
        it, while the model itself learns from every row (the prior, encoders and
        pseudo-labels are fitted once; docs/evaluation.md). About K more classifier
        steps of cost. 0: off. `auto`, the pipeline's default: 5 folds where
        validation_fraction is `auto` too and X holds at most 20,000 rows, else
        validation_fraction's part. settings={"classifier.shipped": "ensemble"} makes
        the folds' classifiers the model (their scores averaged) instead of a refit.
    validation_scope : {"classifier", "recipe"}, default="classifier"
        What the folds refit. "classifier": the classifier step alone, on the prior,
        encoders and pseudo-labels fitted once from every row, whose labels the encoder
        has read: its estimates run high by what it memorised of the labelled positives,
        and that differs between recipes that pretrain differently. "recipe": every
        step, once per fold, on the other folds' rows alone (K more whole fits), so no
        score reads a label of its own row; use it to choose between pretraining
        recipes (docs/evaluation.md).
    threshold : float, default=0.5
        `predict` says positive when P(y = 1 | x) >= threshold.
    random_state : int, default=0
        Seeds every random choice (base.seed).
    device : str, default="auto"
        auto | cpu | cuda (base.device).
    progress : bool, default=True
        Progress bars (tqdm) for the prior, each encoder's pretraining and the heads, as
        the command line shows them; False: quiet. A pretraining whose first epoch says
        it will run over 10 minutes warns with its projection either way
        (pucl.pretraining.loop.SlowRunWarning).

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    prior_ : float
        The class prior used (estimated, or the given number).
    recipe_ : pucl.recipe.Recipe
        Every setting the model was built with, its `auto` settings decided for X.
    members_ : list of (model, head)
        Each encoder (with its projection head) and the classifier head on it.
    model_, head_ : the first member's.
    pseudo_labels_ : ndarray
        PUPL's labels of the training rows, when the objective reads them.
    prior_std_ : float or None
        The estimated prior's standard deviation, from a bootstrap of the estimator's
        held-out scores (and its restarts); None for a given prior or an estimator that
        measures none. Where 1.96 times it exceeds evaluate.prior_error, `fit` warns
        (pucl.recipe.prior.PriorUncertainWarning) and `estimates_`' intervals cover that
        wider error.
    timings_ : dict
        Seconds `fit` spent in each step: prior, pretrain (every encoder), pupl (when the
        objective reads pseudo-labels), classifier.
    estimates_ : dict
        With validation_fraction > 0 (or validation_folds): the label-free estimates of
        the held-out (or out-of-fold) rows, named
        as in the pipeline's metrics.json: `val_est_accuracy`, `val_est_f1`, `val_est_auc`,
        each with `_low` / `_high` (an interval that also covers a prior off by
        evaluate.prior_error), and the held-out counts `val_n_p`, `val_n_u`
        (docs/evaluation.md). `estimate(X, y)` gives the same for rows held out by hand.
    validation_scores_ : pandas.DataFrame
        With estimates_: the rows the estimates read, one per row, as the pipeline's
        validation_scores.csv: `index` (the row of X), `pu` (1 = labelled), `in_u` (in
        the unlabeled sample), `score` (P(y = 1 | x) from a model that never saw the
        row). Two fits on the same rows, seed and prior pair them row for row
        (pucl.evaluation.paired), far more tightly than their estimates side by side.
        Not kept by `save`.
    """

    def __init__(self, prior: str | float = _PRIOR.method, loss: str = _PRETRAIN.loss,
                 encoder: str = _PRETRAIN.encoder, epochs: int | str = _PRETRAIN.epochs,
                 batch_size: int = _PRETRAIN.batch_size, lr: float = _PRETRAIN.lr,
                 weight_decay: float = _PRETRAIN.weight_decay,
                 temperature: float = _PRETRAIN.temperature,
                 proj_dim: int = _PRETRAIN.proj_dim, proj_hidden: int = _PRETRAIN.proj_hidden,
                 augment: dict | None = None, objective: str = _CLASSIFIER.objective,
                 head_epochs: int = _CLASSIFIER.epochs, head_lr: float = _CLASSIFIER.lr,
                 features: str = _CLASSIFIER.features,
                 finetune_epochs: int = _CLASSIFIER.finetune_epochs,
                 finetune_lr: float = _CLASSIFIER.finetune_lr,
                 neighbours: int = _CLASSIFIER.neighbours, mirror: bool = _EVALUATE.tta == "hflip",
                 shift: int = _EVALUATE.tta_shift, members: int = _PRETRAIN.members,
                 scenario: str = SplitParams().scenario,
                 max_unlabeled: int | None = SplitParams().max_unlabeled,
                 settings: dict | None = None,
                 validation_fraction: float = 0.0, validation_folds: int | str = 0,
                 validation_scope: str = "classifier", threshold: float = 0.5,
                 random_state: int = BaseParams().seed,
                 device: str = BaseParams().device, progress: bool = True):
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
        self.features = features
        self.finetune_epochs = finetune_epochs
        self.finetune_lr = finetune_lr
        self.neighbours = neighbours
        self.mirror = mirror
        self.shift = shift
        self.members = members
        self.scenario = scenario
        self.max_unlabeled = max_unlabeled
        self.settings = settings
        self.validation_fraction = validation_fraction
        self.validation_folds = validation_folds
        self.validation_scope = validation_scope
        self.threshold = threshold
        self.random_state = random_state
        self.device = device
        self.progress = progress

    @classmethod
    def from_preset(cls, preset: str | Path, variant: str | None = None, **params: Any
                    ) -> PUClassifier:
        """The estimator of a preset's variant (its recommended one by default): a preset's
        name (params/presets/NAME.yaml of the project) or a YAML file's path. The
        preset's data settings (data.*, split.n_p, paths.*) say which data its protocol
        fits on: pass those rows to `fit`. `params` set the estimator's other parameters
        (random_state, device, ...)."""
        from pucl.params.presets import load_preset
        from pucl.params.sweeps import variant_overrides

        _, overrides = variant_overrides(load_preset(preset), variant)
        return cls(**{**cls.parameters_of(overrides), **params})

    @staticmethod
    def parameters_of(overrides: dict[str, Any]) -> dict[str, Any]:
        """A pipeline's dotted settings as this estimator's parameters: its own where it
        has one, the rest in `settings`; the data's (data.*, split.* but the scenario,
        paths.*, base.*, the diagnostics of evaluate) are not the estimator's."""
        params: dict[str, Any] = {}
        settings: dict[str, Any] = {}
        augment: dict[str, Any] = {}
        by_setting = {key: name for name, key in SETTING_OF.items()}
        for key, value in overrides.items():
            if key in by_setting:
                params[by_setting[key]] = value
            elif key == "prior.method" and value not in ("given", "oracle"):
                params["prior"] = value
            elif key == "prior.value" or (key == "prior.method" and value == "given"):
                params["prior"] = overrides["prior.value"]
            elif key == "prior.method":
                raise ParamsError("prior.method 'oracle' reads the true labels of U, which "
                                  "an estimator never has (allowed: an estimator or a number)")
            elif key == "evaluate.tta":
                params["mirror"] = value == "hflip"
            elif key == "split.scenario":
                params["scenario"] = value
            elif key == "split.max_unlabeled":
                params["max_unlabeled"] = value
            elif key.startswith("pretrain.augment."):
                augment[key.removeprefix("pretrain.augment.")] = value
            elif key.split(".")[0] in ("prior", "pretrain", "pupl", "classifier"):
                settings[key] = value
        return {**params, **({"augment": augment} if augment else {}),
                **({"settings": settings} if settings else {})}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # PU labels are binary by definition
        tags.input_tags.allow_nan = False
        return tags

    # -- settings --------------------------------------------------------------------

    def _recipe(self) -> Recipe:
        """Every setting of the model: the defaults, then `settings`, then the
        estimator's own parameters."""
        settings = dict(self.settings or {})
        own = {**{key: name for name, key in SETTING_OF.items()}, **OWN_SHAPE}
        for key in settings:
            name = own.get(key, "augment" if key.startswith("pretrain.augment.") else None)
            if name is not None:
                raise ValueError(f"settings[{key!r}] is the parameter {name}: pass {name}=... "
                                 f"instead")
        for name, key in SETTING_OF.items():
            settings[key] = getattr(self, name)
        settings["evaluate.tta"] = "hflip" if self.mirror else "none"
        if isinstance(self.prior, str):
            settings["prior.method"] = self.prior
        else:
            settings.update({"prior.method": "given", "prior.value": float(self.prior)})
        for key, value in (self.augment or {}).items():
            settings[f"pretrain.augment.{key}"] = value
        for section, key in (("pretrain", "prior"), ("classifier", "prior")):
            if settings.get(f"{section}.{key}") == "oracle":
                raise ValueError(f"{section}.prior 'oracle' reads the true labels of U, which "
                                 "an estimator never has (allowed: estimate or a number)")
        return Recipe.from_settings(settings, int(self.random_state))

    def _split_params(self) -> SplitParams:
        # the split's settings keep the bounds params.yaml's split section has (one home)
        return SplitParams.model_validate({
            "scenario": self.scenario, "max_unlabeled": self.max_unlabeled,
            "val_fraction": self.validation_fraction, "folds": self.validation_folds})

    def _check_params(self) -> Recipe:
        try:
            self._split_params()
        except ValidationError as exc:
            key = {"val_fraction": "validation_fraction", "folds": "validation_folds"}
            line = str(invalid_settings(exc, SplitParams))
            for field, name in key.items():
                line = line.replace(f"'{field}'", f"'{name}'").replace(f"split.{field}", name)
            raise ValueError(line) from None
        if self.validation_scope not in VALIDATION_SCOPES:
            raise ValueError(f"validation_scope must be one of {', '.join(VALIDATION_SCOPES)}, "
                             f"got {self.validation_scope!r}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold}")
        if not isinstance(self.prior, str) and not 0.0 < float(self.prior) < 1.0:
            raise ValueError(f"prior must be in (0, 1), got {self.prior}")
        recipe = self._recipe()
        if self.validation_scope == "recipe" and recipe.classifier.shipped == "ensemble":
            raise ValueError("classifier.shipped 'ensemble' ships the folds' classifiers, "
                             "which validation_scope 'recipe' does not keep (allowed with "
                             "it: refit)")
        return recipe

    def _inputs(self, X: Any, reset: bool) -> np.ndarray:
        """float32 [n, d] features or [n, c, h, w] images (uint8 pixels kept as uint8):
        the inputs pucl.data.inputs accepts, as the pipeline's npz loader does."""
        arr = np.asarray(X) if not hasattr(X, "iloc") else X
        if getattr(arr, "ndim", 2) in (3, 4):
            arr = as_model_input(arr, "X")
            arr = validate_data(self, arr, reset=reset, allow_nd=True, ensure_2d=False,
                                dtype=None)
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

    # -- learning ----------------------------------------------------------------------

    def fit(self, X: Any, y: Any) -> PUClassifier:
        """X: images [n, h, w] or [n, c, h, w] (uint8, or floats in [0, 1]) or features
        [n, d] (pucl.data.inputs); y: the PU labels s, 1 = labelled positive and 0 =
        unlabeled (of two other labels, the greater marks the labelled positives, as
        scikit-learn's pos_label)."""
        recipe = self._check_params()
        x = self._inputs(X, reset=True)
        self.classes_, s = self._pu_labels(y, len(x))
        if self.mirror and x.ndim != 4:
            raise ValueError(f"mirror=True averages each image with its mirror image, but X "
                             f"has feature rows of shape {list(x.shape[1:])} (allowed for "
                             "feature rows: False)")
        if recipe.classifier.neighbours > len(x):  # checked before any training
            raise ValueError(f"neighbours = {recipe.classifier.neighbours} exceeds the "
                             f"{len(x)} training rows (allowed: 0 to {len(x)})")
        labelled = s == 1
        rng = np.random.default_rng(recipe.seed)
        # the pipeline's own draws: U capped at max_unlabeled rows, then the validation
        # part (exact counts; a part too small refused in one line)
        split = cap_unlabeled(given_pu_split(labelled, self.scenario), self.max_unlabeled,
                              rng)
        folds, part = validation_plan(self._split_params(), recipe, x.shape[1:], len(x),
                                      int(labelled.sum()))
        try:
            held = validation_rows(split, part, rng, "validation_fraction")
        except DataError as exc:
            raise ValueError(str(exc)) from None
        train = split.used & ~held
        # every row trains: the rows as given, not a copy of them
        x_fit, labelled_fit, in_u = ((x, labelled, split.in_u) if train.all() else
                                     (x[train], labelled[train], split.in_u[train]))
        fold = None
        if folds:
            try:
                fold = crossfit_folds(labelled_fit, in_u, folds, recipe.seed)
            except DataError as exc:
                raise ValueError(str(exc).replace("split.folds", "validation_folds")) from None
        clock = StepClock()
        whole = self.validation_scope == "recipe"  # the folds refit every step
        fitted = fit_sequence(recipe, x_fit, labelled_fit, in_u, resolve_device(self.device),
                              self.progress, clock, None if whole else fold)
        self.prior_ = fitted.prior.value
        self.prior_std_ = fitted.prior.details.get("prior_std")
        if fitted.pseudo_labels is not None:
            self.pseudo_labels_ = fitted.pseudo_labels
        self.recipe_, self.members_ = fitted.recipe, fitted.members
        self.model_, self.head_ = self.members_[0]
        for stale in ("estimates_", "validation_scores_"):  # from an earlier fit
            vars(self).pop(stale, None)
        if held.any():
            self.estimates_ = self._validate(np.flatnonzero(held), self._scores(x[held]),
                                             s[held])
        elif fold is not None:
            out_of_fold = (self._refit_folds(x_fit, labelled_fit, fold, clock) if whole
                           else fitted.out_of_fold)
            self.estimates_ = {**self._validate(np.flatnonzero(train), out_of_fold,
                                                labelled_fit.astype(np.int64)),
                               "val_folds": folds}
        self.timings_ = dict(clock.seconds)
        return self

    def _refit_folds(self, x: np.ndarray, labelled: np.ndarray, fold: np.ndarray,
                     clock: StepClock) -> np.ndarray:
        """validation_scope="recipe": each fold's rows scored by the whole recipe (prior,
        encoders, pseudo-labels, classifier) fitted on the other folds' rows alone."""
        scores = np.empty(len(x))
        settings = {"validation_folds": 0, "validation_fraction": 0.0, "progress": False}
        with clock("crossfit"):
            for k in range(int(fold.max()) + 1):
                out = fold == k
                model = clone(self).set_params(**settings).fit(x[~out], labelled[~out])
                scores[out] = model._scores(x[out])
        return scores

    def estimate(self, X: Any, y: Any) -> dict[str, float]:
        """Label-free estimates of this model's accuracy, F1 and AUC on PU rows it did not
        learn from (X, and y = their PU labels as in `fit`), with intervals: the entries of
        `estimates_` (docs/evaluation.md). No true label of an unlabeled row is read."""
        check_is_fitted(self, "head_")
        x = self._inputs(X, reset=False)
        y = column_or_1d(y)
        if len(y) != len(x) or not np.isin(y, self.classes_).all():
            raise ValueError(f"y must hold one PU label per row of X ({len(x)}), each one of "
                             f"the labels fit saw ({self.classes_.tolist()})")
        return self._estimates(self._scores(x), (y == self.classes_[1]).astype(np.int64))

    def _validate(self, index: np.ndarray, scores: np.ndarray, s: np.ndarray
                  ) -> dict[str, float]:
        """The estimates of the validation rows (rows `index` of X), keeping their scores
        as the pipeline's validation_scores.csv does, for paired comparisons."""
        self.validation_scores_ = pd.DataFrame({
            "index": index, "pu": s, "in_u": unlabeled_rows(s == 1, self.scenario),
            "score": scores})
        return self._estimates(scores, s)

    def _estimates(self, scores: np.ndarray, s: np.ndarray) -> dict[str, float]:
        labelled = s == 1
        in_u = unlabeled_rows(labelled, self.scenario)
        if min(labelled.sum(), in_u.sum()) < MIN_VALIDATION_ROWS:
            raise ValueError(f"a label-free estimate needs at least {MIN_VALIDATION_ROWS} "
                             f"labelled positives and {MIN_VALIDATION_ROWS} unlabeled rows, "
                             f"got {int(labelled.sum())} and {int(in_u.sum())}")
        found = validation_metrics(scores[labelled], scores[in_u], float(self.prior_),
                                   self._prior_error(), seed=self.recipe_.seed)
        return {key: float(value) for key, value in found.items()
                if key.startswith(("val_est_", "val_n_"))}

    def _prior_error(self) -> float:
        """The prior error the intervals cover: evaluate.prior_error, or the estimate's
        own half-width where wider."""
        return error_allowed(self.recipe_.evaluate.prior_error,
                             half_width({"prior_std": getattr(self, "prior_std_", None)}))

    # -- prediction ----------------------------------------------------------------------

    def predict_proba(self, X: Any) -> np.ndarray:
        """[P(y = 0 | x), P(y = 1 | x)] per row, averaged over encoders and views."""
        check_is_fitted(self, "head_")
        positive = self._scores(self._inputs(X, reset=False))
        return np.column_stack([1.0 - positive, positive])

    def _scores(self, x: np.ndarray) -> np.ndarray:
        """P(y = 1 | x) of checked inputs, averaged over encoders and views."""
        # the test-time views are the current mirror and shift (set_params after fit works)
        recipe = replace(self.recipe_, evaluate=self.recipe_.evaluate.model_copy(update={
            "tta": "hflip" if self.mirror else "none", "tta_shift": self.shift}))
        members = self.members_
        device = resolve_device(self.device)
        features = view_features(recipe, members, x, recipe.classifier.features, device)
        scores = member_scores([head for _, head in members], features, device)
        return scores.mean(axis=(0, 1)).astype(np.float64)

    def decision_function(self, X: Any) -> np.ndarray:
        """log P(y = 1 | x) - log P(y = 0 | x): positive where the head leans positive."""
        proba = np.clip(self.predict_proba(X), 1e-12, 1.0)
        return np.log(proba[:, 1]) - np.log(proba[:, 0])

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "head_")
        return self.classes_[(self.predict_proba(X)[:, 1] >= self.threshold).astype(int)]

    # -- saving ------------------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write the fitted estimator to `path` (a `.pt` file, written whole or not at all)
        as tensors and plain values: `PUClassifier.load(path)` and `pucl predict --model
        PATH` read it back without unpickling any object, so a file from someone else
        cannot run code (unlike pickle or joblib, which run whatever the file names)."""
        check_is_fitted(self, "head_")
        write_torch(Path(path), {
            "format": SAVED_FORMAT, "version": SAVED_VERSION,
            "params": jsonable(self.get_params(deep=False)), "recipe": self.recipe_.to_dict(),
            "seed": self.recipe_.seed, "classes": self.classes_.tolist(),
            "prior": float(self.prior_), "prior_std": getattr(self, "prior_std_", None),
            "n_features_in": int(self.n_features_in_),
            "feature_names_in": (self.feature_names_in_.tolist()
                                 if hasattr(self, "feature_names_in_") else None),
            "members": [{"model": describe_model(model), "head": describe(head)}
                        for model, head in self.members_],
            "pseudo_labels": (torch.as_tensor(self.pseudo_labels_)
                              if hasattr(self, "pseudo_labels_") else None),
            "estimates": getattr(self, "estimates_", None)})

    @classmethod
    def load(cls, path: str | Path) -> PUClassifier:
        """The estimator `save` wrote to `path`; a file of anything else, or holding more
        than tensors and plain values, is refused with one line (pucl.errors.DataError)."""
        path = Path(path)
        try:
            state = read_torch(path, "saved estimator", "fit it again and save it with "
                               "PUClassifier.save")
        except FileNotFoundError:
            raise DataError(f"no saved estimator at {path}") from None
        except DataError:
            raise
        except Exception as exc:  # a torch archive's own errors: truncated, not a zip
            raise DataError(f"cannot read the saved estimator {path}: "
                            f"{type(exc).__name__}: {exc}") from None
        if not isinstance(state, dict) or state.get("format") != SAVED_FORMAT:
            raise DataError(f"{path} is not an estimator saved by PUClassifier.save")
        if state.get("version") != SAVED_VERSION:
            raise DataError(f"{path} holds a saved estimator of format version "
                            f"{state.get('version')!r}; this pucl reads version "
                            f"{SAVED_VERSION}: fit it again and save it")
        try:
            return cls._from_state(state, path)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise DataError(f"the saved estimator {path} is inconsistent: "
                            f"{type(exc).__name__}: {exc}") from None

    @classmethod
    def _from_state(cls, state: dict, path: Path) -> PUClassifier:
        estimator = cls(**state["params"])
        estimator.recipe_ = Recipe.from_dict(state["recipe"], state["seed"])
        estimator.classes_ = np.asarray(state["classes"])
        estimator.prior_ = state["prior"]
        estimator.prior_std_ = state.get("prior_std")  # files saved before it have none
        estimator.n_features_in_ = state["n_features_in"]
        if state["feature_names_in"] is not None:
            estimator.feature_names_in_ = np.asarray(state["feature_names_in"], dtype=object)
        estimator.members_ = [(build_model(member["model"], path), rebuild(member["head"]))
                              for member in state["members"]]
        estimator.model_, estimator.head_ = estimator.members_[0]
        if state["pseudo_labels"] is not None:
            estimator.pseudo_labels_ = state["pseudo_labels"].numpy()
        if state.get("estimates") is not None:  # files saved before estimates_ have none
            estimator.estimates_ = dict(state["estimates"])
        return estimator
