"""The recipe's first step, and the one place that decides where a class prior comes from.

`resolve_prior` turns prior.method into U's prior: an estimator's estimate, the given
prior.value, or the true prior (oracle, benchmarks only). `prior_for` turns a consumer's
setting (a loss's or a head's `prior`: estimate, oracle or a number) into the number it
uses and where that number came from. The stages, the production cycle and
`PUClassifier` all call these two.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from pucl.data.augment import unit_scale
from pucl.errors import DataError, ParamsError
from pucl.prior import PRIOR_ESTIMATORS
from pucl.recipe import Recipe, entry_settings

# A normal 95% interval: the estimate +- this many of its standard deviations.
Z_95 = 1.96


class PriorUncertainWarning(UserWarning):
    """The class prior's own 95% half-width exceeds evaluate.prior_error."""


@dataclass(frozen=True)
class Prior:
    value: float
    source: str  # given | oracle | the estimator's name (logged, so oracle is never hidden)
    details: dict = field(default_factory=dict)  # the estimator's own (restarts, folds, ...)

    @property
    def halfwidth(self) -> float | None:
        """The estimate's 95% half-width from its measured spread (details' prior_std: a
        bootstrap of the held-out estimators' scores, and their restarts); None where the
        estimator measures none, or the prior was given."""
        return half_width(self.details)


def half_width(details: dict) -> float | None:
    """Z_95 x the estimator's prior_std, from a Prior's details or a prior.json."""
    std = details.get("prior_std")
    return None if std is None else Z_95 * float(std)


def error_allowed(stated: float, halfwidth: float | None) -> float:
    """The prior error the label-free intervals cover: evaluate.prior_error, or the
    estimate's own half-width where that is wider."""
    return max(stated, halfwidth or 0.0)


def uncertainty_warning(value: float, halfwidth: float | None, stated: float,
                        n_positive: int | None = None) -> str | None:
    """One line when the estimate's half-width exceeds evaluate.prior_error (what the
    intervals would otherwise assume), else None."""
    if halfwidth is None or halfwidth <= stated:
        return None
    rows = f" from {n_positive} labelled positives" if n_positive else ""
    return (f"the class prior {value:.3f} is uncertain{rows}: +-{halfwidth:.3f} (95%, the "
            f"estimator's bootstrap) against the +-{stated:.3f} of evaluate.prior_error; the "
            "estimates' intervals are widened to it. More labelled positives narrow it; a "
            "known prior can be given (prior.method: given)")


def estimate_prior(recipe: Recipe, unlabeled: np.ndarray, positive: np.ndarray,
                   progress: bool = False, device: torch.device | None = None
                   ) -> tuple[float, dict]:
    """prior.method's estimate of U's class prior (pixels scaled to [0, 1]) and the
    estimator's details. Estimators that train a network (the held-out ones) train it on
    `device`."""
    entry = PRIOR_ESTIMATORS.get(recipe.prior.method)
    estimator = entry.build(entry_settings(recipe.prior, "prior", entry),
                            random_state=recipe.seed, progress=progress,
                            device=str(device or "cpu"))
    try:
        estimator.fit(unit_scale(unlabeled), unit_scale(positive))
    except ValueError as exc:  # too few rows for the estimator, say
        raise DataError(f"prior estimator {recipe.prior.method!r}: {exc}") from None
    return float(estimator.prior_), estimator.details_


def resolve_prior(recipe: Recipe, rows: Callable[[], tuple[np.ndarray, np.ndarray]],
                  prior_true: float | None = None, progress: bool = False,
                  device: torch.device | None = None) -> Prior:
    """U's class prior as prior.method says: `given` (prior.value), `oracle` (the true
    prior, `prior_true`; a DataError when the data has none) or an estimator's estimate
    from (U, the labelled positives) = `rows()`, called only then (so a caller loads its
    data only for an estimator)."""
    method = recipe.prior.method
    if method == "given":
        if recipe.prior.value is None:
            raise ParamsError("prior.method = 'given' needs prior.value in (0, 1)")
        return Prior(float(recipe.prior.value), "given")
    if method == "oracle":
        if prior_true is None:
            allowed = ", ".join([*PRIOR_ESTIMATORS.names(), "given"])
            raise DataError("prior.method = 'oracle' needs the true labels of U, which this "
                            f"data does not have (allowed here: {allowed})")
        return Prior(float(prior_true), "oracle")
    value, details = estimate_prior(recipe, *rows(), progress, device)
    return Prior(value, method, details)


def prior_for(choice: str | float, prior: Prior, prior_true: float | None = None
              ) -> tuple[float, str]:
    """A consumer's prior setting as (value, source): a number is itself (given),
    `oracle` the true prior, `estimate` the resolved prior with its source."""
    if not isinstance(choice, str):
        return float(choice), "given"
    if choice == "oracle":
        if prior_true is None:
            raise ParamsError("prior 'oracle' needs the true labels of U, which this "
                              "data does not have (allowed here: estimate or a number)")
        return float(prior_true), "oracle"
    return prior.value, prior.source
