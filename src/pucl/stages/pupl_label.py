"""Stage pupl_label: PU-aware pseudo-labels for every training row (docs/pupl.md).

`pupl.method` names a labeller of PSEUDO_LABELLERS: `pu_kmeans` (the paper's prior-free
2-means), `prior_rank` (the prior estimate's share of U nearest the labelled positives),
or `auto` (default): pu_kmeans, unless the share of U it labels positive is further than
`pupl.kmeans.share_tolerance` from the prior estimate, in which case its split is not
P vs N (F-MNIST-I: 0.91 against 0.28) and prior_rank is used; the summary's `fallback`
and the tag `pupl_fallback` say so. Whatever the method, final labels that leave a class
of U empty or stray from the prior estimate are flagged: a warning on stderr, `degenerate`
in the summary, the metric and tag `pupl_degenerate` (docs/pupl.md).

Outputs `labels.parquet` (index, pseudo_label, margin) and `summary.json` (method,
positive fraction, k-means potential). PUPL reads the projector's L2-normalised
outputs. Labelled positives are always positive.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from pucl.artifacts.models import load_model
from pucl.io import write_json, write_table
from pucl.pupl import PSEUDO_LABELLERS
from pucl.recipe import Recipe
from pucl.recipe.pupl import fit_pseudo_labels, pupl_features
from pucl.runtime.device import resolve_device
from pucl.stages._context import StageContext
from pucl.validation import suites

NAME = "pupl_label"


def run(ctx: StageContext) -> dict:
    p = ctx.params.pupl
    manifest = ctx.manifest()
    train = manifest[manifest["split"] == "train"].reset_index(drop=True)
    data = ctx.data()
    model = load_model(ctx.path("pretrain", "model.pt"))
    device = resolve_device(ctx.params.base.device)
    z = pupl_features(model, data.x_train[train["index"].to_numpy()], device)
    ctx.validate(lambda: suites.features(z, model.head.net[-1].out_features))
    labeled = train["pu"].to_numpy() == 1
    in_u = train["in_u"].to_numpy()
    prior = ctx.class_prior("estimate")[0]
    labeller = fit_pseudo_labels(Recipe.of(ctx.params), z, labeled, in_u, prior)
    result, fallback, degenerate = labeller.result_, labeller.fallback_, labeller.degenerate_
    prior_used = prior if PSEUDO_LABELLERS.get(result.method).target.labels_with_prior else None
    if fallback:
        print(f"pucl pupl_label: {fallback}", file=sys.stderr)
    if degenerate:  # kept (pu_kmeans is the paper's, prior-free), but never silently
        print(f"pucl pupl_label: WARNING: degenerate pseudo-labels ({p.method}): {degenerate}",
              file=sys.stderr)

    labels = pd.DataFrame({"index": train["index"], "pseudo_label": result.labels.astype(np.int8),
                           "margin": result.margin})
    summary = {"method": result.method,
               "restarts": getattr(labeller, "restarts", None),
               "best_restart": result.best_restart, "iterations": result.iterations,
               "potential": result.potential, "positive_fraction": result.positive_fraction,
               "positive_fraction_u": float(result.labels[train["in_u"].to_numpy()].mean()),
               "prior_used": prior_used, "n": len(labels), "requested": p.method,
               "fallback": fallback, "degenerate": degenerate,
               "pupl_degenerate": int(degenerate is not None)}
    ctx.validate(lambda: suites.pseudo_labels(train, labels,
                                              ctx.params.validation.positive_fraction))
    write_table(ctx.path("pupl", "labels.parquet"), labels)
    write_json(ctx.path("pupl", "summary.json"), summary)
    ctx.write_validation("pupl")
    ctx.run.log_artifact(ctx.path("pupl", "summary.json"))
    ctx.run.log_artifact(ctx.path("pupl", "labels.parquet"))
    ctx.run.set_tags({"pupl_method": result.method,
                      "pupl_fallback": str(fallback is not None).lower(),
                      "pupl_degenerate": str(degenerate is not None).lower()})
    return {k: v for k, v in summary.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}

