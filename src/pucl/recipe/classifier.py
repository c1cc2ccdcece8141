"""The recipe's classifier step: a head per pretrained encoder."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from pucl.classify.fit import ClassifierSettings, Member, fit_member
from pucl.classify.heads import describe, rebuild
from pucl.classify.linear import LinearSettings
from pucl.classify.objectives import CLASSIFIER_OBJECTIVES, Targets, TrainingRows
from pucl.data.augment import make_augment
from pucl.errors import ParamsError
from pucl.models import ContrastiveModel
from pucl.recipe import Recipe, entry_settings
from pucl.recipe.by_input import AUTO, RULES
from pucl.runtime.device import seeded_generator
from pucl.runtime.parallel import as_arrays, as_tensors, plan, run_jobs


def classifier_objective(recipe: Recipe):
    entry = CLASSIFIER_OBJECTIVES.get(recipe.classifier.objective)
    return entry.build(entry_settings(recipe.classifier, "classifier", entry))


def reads_pseudo_labels(recipe: Recipe) -> bool:
    """Whether the classifier learns from PUPL's pseudo-labels (the objective says)."""
    return classifier_objective(recipe).reads_pseudo_labels


def classifier_settings(recipe: Recipe) -> ClassifierSettings:
    p = recipe.classifier
    undecided = [key for key in RULES["features"]  # what for_inputs decides (one home)
                 if key.startswith("classifier.") and getattr(p, key.split(".")[1]) == AUTO]
    if undecided:  # a caller skipped pucl.recipe.by_input.for_inputs
        raise ValueError(f"{undecided[0]} is still 'auto': decide the recipe for its inputs "
                         "first (pucl.recipe.by_input.for_inputs)")
    return ClassifierSettings(LinearSettings(p.epochs, p.lr, p.weight_decay, p.batch_size),
                              p.features, p.finetune_epochs, p.finetune_lr, p.neighbours)


def head_start(recipe: Recipe, model: ContrastiveModel) -> torch.Tensor:
    """The global random state every head initialises from: the seed, advanced by
    building one model like `model` (what a train_classifier process has done when it
    loads the pretrained model), so member k trains as the single run of its encoder."""
    torch.manual_seed(recipe.seed)
    ContrastiveModel(model.encoder_name, model.in_shape, model.proj_hidden, model.proj_dim)
    return torch.get_rng_state()


def fit_member_job(recipe: Recipe, model: ContrastiveModel, images: np.ndarray,
                   targets: Targets, start: torch.Tensor, method_head: nn.Module | None,
                   device: torch.device, progress: bool = False) -> Member:
    """One head on `model` (fine-tuned in place), its initialisation drawn from torch's
    global random state `start`: everything a fit needs, so that a worker process
    (pucl.runtime.parallel) computes what this process would."""
    torch.set_rng_state(start)
    augment = make_augment(recipe.pretrain.augment, images.ndim == 2)
    return fit_member(classifier_objective(recipe), model, images, targets,
                      classifier_settings(recipe), augment,
                      seeded_generator(recipe.seed, device), device, progress, method_head)


def _fit_member_apart(recipe: Recipe, model: dict, images: np.ndarray, targets: Targets,
                      start: np.ndarray, head: dict | None, device: torch.device) -> dict:
    """`fit_member_job` in a worker process (pucl.runtime.parallel): the model, random
    state and method head arrive as arrays, and the member goes back as arrays."""
    built = ContrastiveModel(*model["shape"]).train(model["training"])
    built.load_state_dict(as_tensors(model["state"]))
    member = fit_member_job(recipe, built, images, targets, as_tensors(start),
                            None if head is None else rebuild(as_tensors(head)), device)
    return as_arrays({"head": describe(member.head), "encoder_state": member.encoder_state,
                      "losses": member.losses, "features": member.features,
                      "phases": member.phases})


def fit_members(recipe: Recipe, jobs: Sequence[tuple], device: torch.device,
                progress: bool = False, workers: int = 1, threads: int | None = None,
                announce=None) -> list[Member]:
    """`fit_member_job` on each job (its arguments but the last two), one after the other
    here, or side by side on `workers` processes (pucl.runtime.parallel); each model ends
    fine-tuned here either way. `announce(k, n)` is told when job k starts here."""
    threads = torch.get_num_threads() if threads is None else threads
    if plan(len(jobs), workers, threads, device)[0] == 1:
        members = []
        for k, job in enumerate(jobs):
            if announce is not None:
                announce(k, len(jobs))
            members.append(fit_member_job(*job, device, progress))
        return members
    apart = [(recipe, {"state": model.state_dict(), "training": model.training,
                       "shape": (model.encoder_name, model.in_shape, model.proj_hidden,
                                 model.proj_dim)},
              images, targets, start, None if head is None else describe(head))
             for recipe, model, images, targets, start, head in jobs]
    plain = run_jobs(_fit_member_apart, [(*as_arrays(job), device) for job in apart], workers,
                     threads, device, "fit heads", progress)
    members = [Member(rebuild(as_tensors(m["head"])), as_tensors(m["encoder_state"]),
                      m["losses"], m["features"], m["phases"]) for m in plain]
    for (_, model, *_), member in zip(jobs, members, strict=True):
        if member.encoder_state is not None:  # fine-tuned in a worker: bring it back
            model.encoder.load_state_dict(member.encoder_state)
    return members


def fit_classifiers(recipe: Recipe, models: Sequence[ContrastiveModel], x_train: np.ndarray,
                    rows: TrainingRows, prior: float | None, device: torch.device,
                    method_heads: Sequence[nn.Module | None] | None = None,
                    progress: bool = False, announce=None, workers: int = 1,
                    threads: int | None = None) -> tuple[Targets, list[Member]]:
    """A classifier on each pretrained encoder (fine-tuning changes them in place): the
    objective's targets among the training rows (`x_train` holds every row `rows.index`
    names) and each encoder's member, fitted on `workers` processes when there are several
    (`fit_members`). `announce(k, n)` is told when member k starts here."""
    targets, jobs = member_jobs(recipe, models, x_train, rows, prior, method_heads)
    return targets, fit_members(recipe, jobs, device, progress, workers, threads, announce)


def member_jobs(recipe: Recipe, models: Sequence[ContrastiveModel], x_train: np.ndarray,
                rows: TrainingRows, prior: float | None,
                method_heads: Sequence[nn.Module | None] | None = None
                ) -> tuple[Targets, list[tuple]]:
    """The objective's targets among `rows` and a `fit_members` job per encoder: each head
    starts from the same global random state, so member k trains as the single run of
    its encoder would."""
    targets = classifier_objective(recipe).targets(rows, prior)
    if recipe.classifier.neighbours > len(targets.rows):  # checked before any training
        raise ParamsError(f"classifier.neighbours = {recipe.classifier.neighbours} exceeds "
                          f"the {len(targets.rows)} training rows (allowed: 0 to "
                          f"{len(targets.rows)})")
    images = x_train[targets.rows]
    start = head_start(recipe, models[0])
    heads = method_heads or [None] * len(models)
    return targets, [(recipe, model, images, targets, start, head)
                     for model, head in zip(models, heads, strict=True)]
