"""Stage estimate_prior: the class prior of U.

`prior.method` names an estimator of PRIOR_ESTIMATORS (auto by default, bbe, km2, ...), fitted
on U and the labelled positives (pixels scaled to [0, 1]) with its settings from the
sub-section of `prior` it declares; or a source: `given` (prior.value) or `oracle` (the
true prior of U; benchmarks only, labelled as such). The true prior is written for
reporting and never read by the method.
"""

from __future__ import annotations

import sys
import time

from pucl.io import write_json
from pucl.recipe import Recipe
from pucl.recipe.prior import resolve_prior, uncertainty_warning
from pucl.runtime.device import resolve_device
from pucl.stages._context import PRIOR_REPORT, StageContext

NAME = "estimate_prior"


def run(ctx: StageContext) -> dict:
    p = ctx.params.prior
    manifest = ctx.manifest()
    train = manifest[manifest["split"] == "train"]
    y_u = train.loc[train["in_u"], "y"]
    # The true prior of U, for reporting only; unknown (None) when a row of U has no label
    # (real PU data): the labelled positives alone would bias it.
    prior_true = float(y_u.mean()) if (y_u >= 0).all() else None
    start = time.perf_counter()

    def rows():  # U and the labelled positives, loaded only for an estimator
        x = ctx.data().x_train
        return (x[train.loc[train["in_u"], "index"].to_numpy()],
                x[train.loc[train["pu"] == 1, "index"].to_numpy()])

    prior = resolve_prior(Recipe.of(ctx.params), rows, prior_true, ctx.progress,
                          resolve_device(ctx.params.base.device))
    stated = ctx.params.evaluate.prior_error
    said = uncertainty_warning(prior.value, prior.halfwidth, stated,
                               int((train["pu"] == 1).sum()))
    if said:  # never silent: the estimates read this prior (docs/prior.md)
        print(f"pucl estimate_prior: WARNING: {said}", file=sys.stderr)
    report = {"method": p.method, "prior_true": prior_true, "oracle": p.method == "oracle",
              **prior.details, "prior": prior.value,
              "abs_error": abs(prior.value - prior_true) if prior_true is not None else None,
              **({"prior_halfwidth": prior.halfwidth, "prior_uncertain": int(bool(said))}
                 if prior.halfwidth is not None else {})}
    # prior.json holds no clock time: every later stage depends on it, and DVC would see
    # an unchanged estimate as changed; the time goes to MLflow with the metrics
    write_json(ctx.path("prior", PRIOR_REPORT), report)
    ctx.run.log_artifact(ctx.path("prior", PRIOR_REPORT))
    ctx.run.set_tags({"prior_source": p.method})
    return {**{k: v for k, v in report.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)},
            "seconds": time.perf_counter() - start}
