"""Classifier objectives (`classifier.objective`): what the downstream head learns from, and
how it learns it.

Each entry is a class that knows three things: which training rows it learns from and
with which labels (`targets`), how a head is fitted on frozen features of them
(`fit_head`), and how encoder and head then learn together (`finetune`). A new objective
is one class here (or in a module of its own in this package, which the registry finds by
itself); its settings, if any, live in `classifier.<name>` (`EntryParams`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from pydantic import Field
from torch import nn

from pucl.errors import DataError
from pucl.registry import EntryParams, Registry

CLASSIFIER_OBJECTIVES = Registry("classifier objective", "pucl.classify")


@dataclass(frozen=True)
class TrainingRows:
    """The split's training rows as a classifier sees them, in manifest order: each row's
    dataset index, whether it is a labelled positive, whether it is in U, and (when PUPL
    ran) its pseudo-label."""

    index: np.ndarray
    labelled: np.ndarray
    in_u: np.ndarray
    pseudo_labels: np.ndarray | None = None

    @property
    def pu_rows(self) -> np.ndarray:
        """Rows that are labelled positives or in U (a split with `split.prior` leaves
        some training rows in neither)."""
        return self.labelled | self.in_u


@dataclass(frozen=True)
class Targets:
    """What one objective learns from. `rows`: the dataset indices it trains on (and the
    bank of neighbour smoothing); `labels`: the 0 / 1 label of each, which a head's fit is
    reported against; PU risks also index the labelled positives and U within `rows`."""

    rows: np.ndarray
    labels: np.ndarray
    positive: np.ndarray | None = None
    unlabeled: np.ndarray | None = None
    prior: float | None = None


class ClassifierObjective:
    """Base of the objectives. `needs_prior`: the stage passes the class prior;
    `reads_pseudo_labels`: it learns from PUPL's labels; `trains`: False when the head
    comes ready-made from a whole training method."""

    needs_prior = False
    reads_pseudo_labels = False
    trains = True

    def targets(self, rows: TrainingRows, prior: float | None) -> Targets:
        raise NotImplementedError

    def fit_head(self, features: np.ndarray, targets: Targets, settings,
                 generator: torch.Generator, progress: bool, method_head: nn.Module | None = None
                 ) -> tuple[nn.Module, list[float]]:
        """A head on frozen features [len(targets.rows), d] and its per-epoch losses
        (`settings`: pucl.classify.linear.LinearSettings). `method_head`: the classifier
        the pretraining method learned, if it learned one."""
        raise NotImplementedError

    def finetune(self, encoder: nn.Module, head: nn.Module, images: torch.Tensor,
                 targets: Targets, settings, augment, generator: torch.Generator,
                 device: torch.device, progress: bool) -> list[float]:
        """Train encoder and head together on images [len(targets.rows), ...]."""
        raise NotImplementedError


class CrossEntropy(ClassifierObjective):
    """Cross-entropy on 0 / 1 labels of some of the training rows."""

    name = "ce"

    def _checked(self, rows: np.ndarray, labels: np.ndarray) -> Targets:
        labels = labels.astype(np.int64)
        if len(set(labels.tolist())) < 2:
            raise DataError(f"{self.name}: the training labels hold a single class; the "
                            f"classifier needs both (positive fraction {labels.mean():.3f})")
        return Targets(rows, labels)

    def fit_head(self, features, targets, settings, generator, progress, method_head=None):
        from pucl.classify.linear import train_linear_head

        return train_linear_head(features, targets.labels, settings, generator,
                                 progress=progress)

    def finetune(self, encoder, head, images, targets, settings, augment, generator, device,
                 progress):
        from pucl.classify.finetune import finetune

        return finetune(encoder, head, images, settings, augment, generator, device,
                        labels=torch.from_numpy(targets.labels), kind="ce", progress=progress)


@CLASSIFIER_OBJECTIVES.register("pupl_ce")
class PUPLCrossEntropy(CrossEntropy):
    """Cross-entropy on the PUPL pseudo-labels (the paper's method)."""

    name = "pupl_ce"
    reads_pseudo_labels = True

    def targets(self, rows, prior):
        if rows.pseudo_labels is None:
            raise DataError("pupl_ce needs PUPL's pseudo-labels: run the pupl_label stage")
        return self._checked(rows.index, rows.pseudo_labels)


@CLASSIFIER_OBJECTIVES.register("naive_ce")
class NaiveCrossEntropy(CrossEntropy):
    """Cross-entropy with every unlabeled row taken as negative (a baseline)."""

    name = "naive_ce"

    def targets(self, rows, prior):
        keep = rows.pu_rows
        return self._checked(rows.index[keep], rows.labelled[keep])


class NNPUParams(EntryParams):
    beta: float = Field(0.0, ge=0.0, description="tolerated negative risk before the "
                        "correcting step")
    gamma: float = Field(1.0, gt=0.0, description="step size on the negative risk")


class PURiskObjective(ClassifierObjective):
    """A PU risk (pucl.classify.pu_risk) on the labelled positives against U, with the
    class prior; U may hold the labelled positives too (case-control)."""

    needs_prior = True
    kind = ""
    beta, gamma, entropy, pairs = 0.0, 1.0, 0.0, 0.0

    def targets(self, rows, prior):
        if prior is None:
            raise ValueError(f"{self.kind} needs the class prior")
        positive, unlabeled = rows.index[rows.labelled], rows.index[rows.in_u]
        union = np.union1d(positive, unlabeled)
        return Targets(union, np.isin(union, positive).astype(np.int64),
                       np.searchsorted(union, positive), np.searchsorted(union, unlabeled),
                       prior)

    def fit_head(self, features, targets, settings, generator, progress, method_head=None):
        from pucl.classify.linear import train_pu_head

        return train_pu_head(features[targets.positive], features[targets.unlabeled],
                             targets.prior, self.kind, settings, generator, progress,
                             self.beta, self.gamma, self.entropy)

    def finetune(self, encoder, head, images, targets, settings, augment, generator, device,
                 progress):
        from pucl.classify.finetune import finetune

        return finetune(encoder, head, images, settings, augment, generator, device,
                        positive=torch.from_numpy(targets.positive),
                        unlabeled=torch.from_numpy(targets.unlabeled), kind=self.kind,
                        prior=targets.prior, beta=self.beta, gamma=self.gamma,
                        progress=progress, entropy=self.entropy, pairs=self.pairs)


@CLASSIFIER_OBJECTIVES.register("nnpu", params=NNPUParams)
class NNPU(PURiskObjective):
    """Non-negative PU risk (Kiryo et al. 2017) on labelled P against U."""

    kind = "nnpu"

    def __init__(self, beta: float = 0.0, gamma: float = 1.0):
        self.beta, self.gamma = beta, gamma


@CLASSIFIER_OBJECTIVES.register("upu")
class UPU(PURiskObjective):
    """Unbiased PU risk (du Plessis et al.) on labelled P against U."""

    kind = "upu"


class DistPUParams(EntryParams):
    entropy: float = Field(0.002, ge=0.0, description="weight of U's mean binary entropy "
                           "(the authors' 0.002)")


@CLASSIFIER_OBJECTIVES.register("dist_pu", params=DistPUParams)
class DistPU(PURiskObjective):
    """Dist-PU's label-distribution alignment (Zhao et al. 2022): the labelled positives'
    mean score to 1, U's to the class prior, and U's scores away from 0.5 (its entropy
    minimisation; the authors' later mixup phase is not part of it)."""

    kind = "dist"

    def __init__(self, entropy: float = 0.002):
        self.entropy = entropy


class PairsParams(EntryParams):
    """The pair loss's weight, shared by the heads that fine-tune with it."""

    pairs: float = Field(2.0, gt=0.0, description="weight of NoiSNCL over rows that share "
                         "a pseudo-label, while fine-tuning")


class DistPUPairsParams(DistPUParams, PairsParams):
    pass


@CLASSIFIER_OBJECTIVES.register("dist_pu_pairs", params=DistPUPairsParams)
class DistPUPairs(DistPU):
    """Dist-PU whose fine-tuning also pulls together the features of rows that share a
    pseudo-label, with NcPU's noisy-pair robust loss (paper 001 eq. 7): the labelled
    positives and the rows of U the head calls positive, and the rest of U."""

    def __init__(self, entropy: float = 0.002, pairs: float = 2.0):
        self.entropy, self.pairs = entropy, pairs


@CLASSIFIER_OBJECTIVES.register("method_head")
class MethodHead(ClassifierObjective):
    """The classifier NcPU or SSC trained together with the encoder."""

    trains = False

    def targets(self, rows, prior):
        keep = rows.pu_rows
        return Targets(rows.index[keep], rows.labelled[keep].astype(np.int64))

    def fit_head(self, features, targets, settings, generator, progress, method_head=None):
        if method_head is None:
            raise DataError("the pretrained model holds no classifier: classifier.objective "
                            "'method_head' needs pretrain.method ncpu or ssc (rerun pretrain)")
        return method_head, []

    def finetune(self, *args, **kwargs):
        raise ValueError("method_head is not fine-tuned: the method trained it end to end")
