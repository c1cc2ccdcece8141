"""Classifier objectives (`classifier.objective`): what the downstream head learns from.

Each entry returns an `Objective`: the rows it trains on (`source`) and the loss. A new PU
risk is a function in `pu_risk` plus an entry here (or in a module of its own in this
package, which the registry finds by itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from pucl.registry import EntryParams, Registry

CLASSIFIER_OBJECTIVES = Registry("classifier objective", "pucl.classify")


@dataclass(frozen=True)
class Objective:
    # pu: labelled positives against U, with a PU risk (needs the class prior);
    # pseudo_labels: PUPL's labels; pu_as_labels: U taken as negative;
    # method: the classifier a whole training method learned with its encoder
    source: Literal["pu", "pseudo_labels", "pu_as_labels", "method"]
    loss: str  # "ce", or a risk of pucl.classify.pu_risk ("nnpu", "upu")
    beta: float = 0.0
    gamma: float = 1.0

    @property
    def needs_prior(self) -> bool:
        return self.source == "pu"


class NNPUParams(EntryParams):
    beta: float = Field(0.0, ge=0.0, description="tolerated negative risk before the "
                        "correcting step")
    gamma: float = Field(1.0, gt=0.0, description="step size on the negative risk")


@CLASSIFIER_OBJECTIVES.register("pupl_ce")
def pupl_ce() -> Objective:
    """Cross-entropy on the PUPL pseudo-labels (the paper's method)."""
    return Objective("pseudo_labels", "ce")


@CLASSIFIER_OBJECTIVES.register("nnpu", params=NNPUParams)
def nnpu(beta: float = 0.0, gamma: float = 1.0) -> Objective:
    """Non-negative PU risk (Kiryo et al. 2017) on labelled P against U."""
    return Objective("pu", "nnpu", beta, gamma)


@CLASSIFIER_OBJECTIVES.register("upu")
def upu() -> Objective:
    """Unbiased PU risk (du Plessis et al.) on labelled P against U."""
    return Objective("pu", "upu")


@CLASSIFIER_OBJECTIVES.register("naive_ce")
def naive_ce() -> Objective:
    """Cross-entropy with every unlabeled row taken as negative (a baseline)."""
    return Objective("pu_as_labels", "ce")


@CLASSIFIER_OBJECTIVES.register("method_head")
def method_head() -> Objective:
    """The classifier NcPU or SSC trained together with the encoder."""
    return Objective("method", "ce")
