"""Independent fits side by side (base.fit_workers, pucl.runtime.parallel): the plan,
and fits that compute in a worker process exactly what they compute here on as many
threads."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pucl.classify.objectives import TrainingRows
from pucl.data.split import crossfit_folds
from pucl.models import ContrastiveModel
from pucl.recipe import Recipe
from pucl.recipe.by_input import for_inputs
from pucl.recipe.crossfit import fit_folds
from pucl.runtime import work
from pucl.runtime.parallel import as_arrays, as_tensors, plan, run_jobs

CPU, GPU = torch.device("cpu"), torch.device("cuda")


@pytest.mark.parametrize("jobs, workers, threads, device, expected", [
    (3, 2, 2, CPU, (2, 1)),   # two folds and a refit on 2 cores: 2 processes of 1 thread
    (2, 2, 8, CPU, (2, 4)),   # the threads shared out
    (4, 3, 8, CPU, (3, 2)),   # what does not divide is left idle, never oversubscribed
    (1, 2, 2, CPU, (1, 2)),   # one fit: here, on every thread
    (4, 1, 2, CPU, (1, 2)),   # the default: here
    (4, 2, 2, GPU, (1, 2)),   # a GPU's fits stay in the process that holds it
    (2, 4, 2, CPU, (2, 1)),   # never more processes than threads (a sweep point's one)
    (2, 2, 1, CPU, (1, 1)),
])
def test_the_plan_shares_the_threads_among_at_most_as_many_processes_as_fits(
        jobs, workers, threads, device, expected):
    assert plan(jobs, workers, threads, device) == expected


def test_jobs_come_back_in_order_and_a_failed_job_fails_the_call():
    assert run_jobs(math.sqrt, [(16.0,), (9.0,), (4.0,)], 2, 2, CPU) == [4.0, 3.0, 2.0]
    with pytest.raises(ValueError, match="math domain error"):
        run_jobs(math.sqrt, [(4.0,), (-1.0,)], 2, 2, CPU)


def test_folds_fitted_side_by_side_are_the_folds_fitted_here_on_as_many_threads():
    """Two folds x two encoders, fine-tuned: in two worker processes of one thread each
    and here on one thread, the same out-of-fold scores, heads and fine-tuned encoders,
    to the last bit, and the same work counted; the pretrained models the folds start
    from are left as they were."""
    rng = np.random.default_rng(0)
    y = (rng.random(300) < 0.5).astype(np.int64)
    x = rng.normal(size=(300, 4)).astype(np.float32) + 2.0 * y[:, None]
    labelled = (y == 1) & (rng.random(300) < 0.4)
    fold = crossfit_folds(labelled, np.ones(300, bool), 2, seed=0)
    recipe = for_inputs(Recipe.from_settings(
        {"classifier.objective": "nnpu", "classifier.epochs": 3,
         "classifier.finetune_epochs": 2, "classifier.batch_size": 64}, seed=0),
        x.shape[1:], len(x))
    rows = TrainingRows(np.arange(len(x)), labelled, np.ones(len(x), bool))
    torch.manual_seed(0)
    models = [ContrastiveModel("mlp", (4,), 16, 8) for _ in range(2)]
    before = [{k: v.clone() for k, v in m.state_dict().items()} for m in models]

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with work.counting() as work_here:
            here = fit_folds(recipe, models, x, rows, fold, 0.5, CPU)
    finally:
        torch.set_num_threads(threads)
    with work.counting() as work_apart:
        apart = fit_folds(recipe, models, x, rows, fold, 0.5, CPU, workers=2, threads=2)

    # the workers' work is counted where the fits were asked for (the choice's tie rule)
    assert work_here.macs > 0 and work_apart.macs == pytest.approx(work_here.macs, rel=1e-9)

    assert np.isfinite(here.scores).all()
    assert np.array_equal(here.scores, apart.scores)
    assert len(here.members) == len(apart.members) == 4
    for (k, model_a, member_a), (j, model_b, member_b) in zip(here.members, apart.members,
                                                              strict=True):
        assert k == j and member_a.losses == member_b.losses
        for a, b in ((model_a, model_b), (member_a.head, member_b.head)):
            state_b = b.state_dict()
            assert all(torch.equal(v, state_b[n]) for n, v in a.state_dict().items())
    for model, state in zip(models, before, strict=True):
        assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_jobs_cross_as_arrays_and_a_tensor_is_refused_before_any_worker_starts():
    """Jobs send arrays, never tensors (torch's reducers would put them in shared memory):
    a tensor among a job's arguments fails the call by name, and as_arrays / as_tensors
    carry a nested state through unchanged, bit for bit."""
    with pytest.raises(TypeError, match="not a Tensor"):
        run_jobs(math.sqrt, [(4.0,), ({"x": [torch.tensor(1.0)]},)], 2, 2, CPU)
    state = {"w": torch.randn(3, 2), "n": torch.tensor(7),
             "masks": [torch.ones(2, dtype=torch.bool)], "name": "lenet5", "none": None}
    sent = as_arrays(state)
    assert not any(isinstance(v, torch.Tensor) for v in (sent["w"], sent["n"], *sent["masks"]))
    back = as_tensors(sent)
    for key in ("w", "n"):
        assert torch.equal(back[key], state[key]) and back[key].dtype == state[key].dtype
    assert torch.equal(back["masks"][0], state["masks"][0])
    assert (back["name"], back["none"]) == ("lenet5", None)
