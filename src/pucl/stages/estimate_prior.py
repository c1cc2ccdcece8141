"""Stage estimate_prior: the class prior of U by KM2 (and KM1), DESIGN section 3.

`prior.method` picks the value used downstream: km2 (default), km1, a `given` value, or
the `oracle` (true prior of U; benchmarks only, labelled as such). The true prior is
written for reporting and never read by the method.
"""

from __future__ import annotations

import time

import numpy as np

from pucl.data.registry import unit_scale
from pucl.errors import DataError, ParamsError
from pucl.io import write_json
from pucl.prior import estimate_prior, prepare_features
from pucl.stages._context import StageContext

NAME = "estimate_prior"


def run(ctx: StageContext) -> dict:
    p = ctx.params.prior
    manifest = ctx.manifest()
    train = manifest[manifest["split"] == "train"]
    y_u = train.loc[train["in_u"], "y"]
    # The true prior of U, for reporting only; unknown (None) when a row of U has no label
    # (real PU data): the labelled positives alone would bias it.
    prior_true = float(y_u.mean()) if (y_u >= 0).all() else None
    report: dict = {"method": p.method, "prior_true": prior_true, "km1": None, "km2": None,
                    "oracle": p.method == "oracle"}
    start = time.perf_counter()
    if p.method in ("km1", "km2"):
        data = ctx.data()
        x = data.x_train
        mixture = x[train.loc[train["in_u"], "index"].to_numpy()]
        component = x[train.loc[train["pu"] == 1, "index"].to_numpy()]
        rng = np.random.default_rng(ctx.params.base.seed)
        mix, comp = prepare_features(unit_scale(mixture), unit_scale(component), p.pca_dim,
                                     p.max_per_side, rng)
        est = estimate_prior(mix, comp, p.bandwidth_multipliers, p.lambda_max, p.epsilon,
                             refine_bandwidth=p.refine_bandwidth)
        report.update(est.to_dict())
        used = est.km2 if p.method == "km2" else est.km1
    elif p.method == "given":
        if p.value is None:
            raise ParamsError("prior.method = 'given' needs prior.value in (0, 1)")
        used = p.value
    else:
        if prior_true is None:
            raise DataError("prior.method = 'oracle' needs the true labels of U, which this "
                            "data does not have (allowed here: km2, km1, given)")
        used = prior_true
    report["prior"] = float(used)
    report["abs_error"] = abs(float(used) - prior_true) if prior_true is not None else None
    report["seconds"] = time.perf_counter() - start
    write_json(ctx.path("prior", "prior.json"), report)
    ctx.run.log_artifact(ctx.path("prior", "prior.json"))
    ctx.run.set_tags({"prior_source": "oracle" if p.method == "oracle" else p.method})
    return {k: v for k, v in report.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}

