"""Downstream classifiers: heads on encoder features (base, prototype, heads), their
training (linear, pu_risk, finetune) and the deployable encoder + head (deployable).
Import the submodules: this package imports nothing, so a stage that only loads a head
does not depend on the training code."""
