"""Stage train_classifier: linear head on frozen encoder features, cross-entropy on the
PUPL pseudo-labels (DESIGN section 6). Outputs `head.pt` and `history.csv`."""

from __future__ import annotations

import pandas as pd
import torch

from pucl.classify import LinearSettings, train_linear_head
from pucl.errors import DataError
from pucl.features import embed
from pucl.runtime import resolve_device, seeded_generator
from stages._artifacts import load_model
from stages._common import (
    LABEL_COLUMNS,
    StageContext,
    atomic_path,
    main_for,
    read_table,
    write_table,
)

NAME = "train_classifier"


def run(ctx: StageContext) -> dict:
    p = ctx.params.classifier
    pseudo = read_table(ctx.path("pupl", "labels.parquet"), LABEL_COLUMNS)
    data = ctx.data()
    model = load_model(ctx.path("pretrain", "model.pt"))
    features = embed(model, data.x_train[pseudo["index"].to_numpy()], "encoder",
                     resolve_device(ctx.params.base.device))
    labels = pseudo["pseudo_label"].to_numpy()
    if len(set(labels.tolist())) < 2:
        raise DataError("PUPL produced a single class; the classifier needs both "
                        f"(positive fraction {labels.mean():.3f})")
    head, losses = train_linear_head(
        features, labels, LinearSettings(p.epochs, p.lr, p.weight_decay, p.batch_size),
        seeded_generator(ctx.params.base.seed), progress=ctx.progress,
    )
    train_acc = float(((head.positive_score(features) >= 0.5) == labels).mean())
    with atomic_path(ctx.path("classifier", "head.pt")) as tmp:
        torch.save({"state_dict": head.state_dict(), "dim": features.shape[1]}, tmp)
    write_table(ctx.path("classifier", "history.csv"),
                pd.DataFrame({"epoch": range(1, len(losses) + 1), "loss": losses}))
    for i, loss in enumerate(losses, start=1):
        if i % 10 == 0 or i == len(losses):
            ctx.run.log_metrics({"loss": loss}, step=i)
    ctx.run.log_artifact(ctx.path("classifier", "head.pt"))
    return {"final_loss": losses[-1], "pseudo_label_fit": train_acc}


def main() -> None:
    main_for(NAME, run)


if __name__ == "__main__":
    main()
