"""DVC stages: one module per stage, each runnable as `python -m stages.<name>`."""

STAGES = ("build_split", "estimate_prior", "pretrain", "pupl_label", "train_classifier",
          "evaluate")
