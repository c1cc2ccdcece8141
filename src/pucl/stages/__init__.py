"""The pipeline's stages, in order: one module each, run by DVC as
`python -m pucl.stages NAME` and by the Prefect flows in-process.

STAGES is the one list of stages: each name maps to the params sections the stage reads
(dvc.yaml's `params:` and the MLflow params of its run; a test checks dvc.yaml against it).
"""

STAGES: dict[str, tuple[str, ...]] = {
    "build_split": ("data", "split", "validation"),
    "estimate_prior": ("data", "prior"),
    "pretrain": ("data", "pretrain"),
    "pupl_label": ("data", "pupl", "validation"),
    # augment: fine-tuning; the test views: split.folds scores its out-of-fold rows with them
    "train_classifier": ("data", "classifier", "pretrain.augment", "evaluate.tta",
                         "evaluate.tta_shift"),
    "evaluate": ("data", "evaluate", "validation", "pretrain.augment"),
}

# Stages that need no deterministic torch kernels (numpy / scipy only; estimate_prior
# trains its held-out network on base.device).
NUMPY_ONLY_STAGES = ("build_split",)
