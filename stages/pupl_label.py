"""Stage pupl_label: PU-aware pseudo-labels for every training row (DESIGN section 5).

Outputs `labels.parquet` (index, pseudo_label, margin) and `summary.json` (method,
features, positive fraction, k-means potential). Labelled positives are always positive.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pucl.features import embed
from pucl.pupl import prior_rank, pu_kmeans
from pucl.runtime import resolve_device
from pucl.validation import suites
from stages._artifacts import load_model
from stages._common import StageContext, main_for, write_json, write_table

NAME = "pupl_label"


def run(ctx: StageContext) -> dict:
    p = ctx.params.pupl
    manifest = ctx.manifest()
    train = manifest[manifest["split"] == "train"].reset_index(drop=True)
    data = ctx.data()
    model = load_model(ctx.path("pretrain", "model.pt"))
    device = resolve_device(ctx.params.base.device)
    z = embed(model, data.x_train[train["index"].to_numpy()], p.features, device)
    expected_dim = (model.head.net[-1].out_features if p.features == "projector"
                    else model.encoder.out_dim)
    ctx.validate(lambda: suites.features(z, expected_dim,
                                         ctx.params.validation.feature_variance_floor))
    labeled = train["pu"].to_numpy() == 1
    if p.method == "pu_kmeans":
        result = pu_kmeans(z, labeled, p.restarts, p.max_iter,
                           np.random.default_rng(ctx.params.base.seed))
        prior_used = None
    else:
        prior_used = float(ctx.read_json("prior", "prior.json")["prior"])
        result = prior_rank(z, labeled, train["in_u"].to_numpy(), prior_used)

    labels = pd.DataFrame({"index": train["index"], "pseudo_label": result.labels.astype(np.int8),
                           "margin": result.margin})
    summary = {"method": result.method, "features": p.features, "restarts": p.restarts,
               "best_restart": result.best_restart, "iterations": result.iterations,
               "potential": result.potential, "positive_fraction": result.positive_fraction,
               "positive_fraction_u": float(result.labels[train["in_u"].to_numpy()].mean()),
               "prior_used": prior_used, "n": len(labels)}
    ctx.validate(lambda: suites.pseudo_labels(train, labels,
                                              ctx.params.validation.positive_fraction))
    write_table(ctx.path("pupl", "labels.parquet"), labels)
    write_json(ctx.path("pupl", "summary.json"), summary)
    ctx.write_validation("pupl")
    ctx.run.log_artifact(ctx.path("pupl", "summary.json"))
    ctx.run.log_artifact(ctx.path("pupl", "labels.parquet"))
    ctx.run.set_tags({"pupl_method": result.method, "pupl_features": p.features})
    return {k: v for k, v in summary.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def main() -> None:
    main_for(NAME, run)


if __name__ == "__main__":
    main()
