"""Stage reestimate_prior: the class prior again, on the pretrained encoder's features.

With `prior.reestimate` naming an estimator (auto, bbe, dedpul, km2, ...), U's encoder
features are set against those of the labelled positives that pretraining saw only as
unlabeled rows (`pretrain.holdout_positives`). Positives the encoder learned as labelled
are not a fair sample of U's positives in feature space (the loss pulled them together,
away from the rest of U), so only the held-out ones are scored.

That estimate replaces the first one (estimate_prior) in every stage after this one:
pseudo-labels, the classifier's PU risk, the evaluation. The objectives that need a
prior during pretraining (PUNCE, DCL, SSC's prior-ranked negatives) ran before and used
the first estimate. With `none` the first estimate passes through unchanged.

Output: `reestimate.json` beside `prior.json`: `prior` (what downstream uses), `source`
(the estimator, `<name>@features` when re-estimated), `prior_first`, `prior_true`,
`abs_error`, and the estimator's details.
"""

from __future__ import annotations

import time

from pucl.artifacts import load_model
from pucl.data.split import pretrain_holdout
from pucl.errors import DataError
from pucl.features import embed
from pucl.io import write_json
from pucl.prior import PRIOR_ESTIMATORS
from pucl.runtime import resolve_device
from pucl.stages._context import FINAL_PRIOR, FIRST_PRIOR, StageContext

NAME = "reestimate_prior"


def run(ctx: StageContext) -> dict:
    p = ctx.params.prior
    first = ctx.read_json("prior", FIRST_PRIOR)
    report: dict = {"method": p.reestimate, "source": first["method"],
                    "oracle": bool(first.get("oracle")), "prior_first": first["prior"],
                    "prior_true": first.get("prior_true")}
    start = time.perf_counter()
    if p.reestimate == "none":
        used = float(first["prior"])
    else:
        train = ctx.manifest().query("split == 'train'")
        unlabeled = train.loc[train["in_u"], "index"].to_numpy()
        held_out = pretrain_holdout(train.loc[train["pu"] == 1, "index"].to_numpy(),
                                    ctx.params.pretrain.holdout_positives, ctx.params.base.seed)
        x = ctx.data().x_train
        model = load_model(ctx.path("pretrain", "model.pt"))
        device = resolve_device(ctx.params.base.device)
        entry = PRIOR_ESTIMATORS.get(p.reestimate)
        estimator = entry.build(ctx.settings("prior", entry), random_state=ctx.params.base.seed,
                                progress=ctx.progress)
        try:
            estimator.fit(embed(model, x[unlabeled], "encoder", device),
                          embed(model, x[held_out], "encoder", device))
        except ValueError as exc:  # too few held-out positives for its split, say
            raise DataError(f"prior.reestimate {p.reestimate!r} on the "
                            f"{len(held_out)} held-out positives "
                            f"(pretrain.holdout_positives = "
                            f"{ctx.params.pretrain.holdout_positives}): {exc}") from None
        report.update(estimator.details_)
        report.update(method=p.reestimate, source=f"{p.reestimate}@features", oracle=False,
                      n_p_heldout=len(held_out))
        used = float(estimator.prior_)
    report["prior"] = used
    true = report["prior_true"]
    report["abs_error"] = abs(used - true) if true is not None else None
    report["seconds"] = time.perf_counter() - start
    write_json(ctx.path("prior", FINAL_PRIOR), report)
    ctx.run.log_artifact(ctx.path("prior", FINAL_PRIOR))
    ctx.run.set_tags({"prior_source": report["source"]})
    return {k: v for k, v in report.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}
