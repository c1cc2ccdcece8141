"""Work counted in multiply-accumulates (pucl.runtime.work) against LeNet-5's MACs worked
out by hand, a training pass at three forwards, the neighbour search's n_q x n_b x d, and
a pipeline's work per seed (pucl.reporting.tables.work_per_seed)."""

from __future__ import annotations

import math
import threading

import pytest
import torch

from pucl.classify.neighbours import nearest_rows
from pucl.models.encoders import LeNet5
from pucl.pretraining.loop import EpochStats, TrainingLoop
from pucl.reporting.tables import work_per_seed
from pucl.runtime import work
from pucl.stages._harness import parent_rollup

# LeNet-5 on 1x28x28, by hand: conv 5x5 1->6 gives 6x24x24 outputs of 25 MACs, conv 5x5
# 6->16 on 12x12 gives 16x8x8 outputs of 150, then 256->120 and 120->84
LENET5_MACS = 6 * 24 * 24 * 25 + 16 * 8 * 8 * 150 + 256 * 120 + 120 * 84


def test_an_inference_pass_counts_lenet5s_macs_per_image():
    model = LeNet5((1, 28, 28)).eval()
    with work.counting() as tally, torch.no_grad():
        model(torch.zeros(4, 1, 28, 28))
    assert tally.macs == 4 * LENET5_MACS == pytest.approx(1_123_200)
    assert tally.gmac == pytest.approx(4 * LENET5_MACS / 1e9)


def test_a_training_pass_counts_three_forwards_and_frozen_layers_one():
    model = LeNet5((1, 28, 28))
    with work.counting() as tally:
        model(torch.zeros(2, 1, 28, 28)).sum().backward()
    assert tally.macs == 2 * work.TRAINING_FACTOR * LENET5_MACS
    model.requires_grad_(False)
    with work.counting() as frozen:
        model(torch.zeros(2, 1, 28, 28))
    assert frozen.macs == 2 * LENET5_MACS


def test_nothing_is_counted_outside_a_tally_and_nested_tallies_each_count():
    model = LeNet5((1, 28, 28)).eval()
    with torch.no_grad():
        with work.counting() as outer:
            model(torch.zeros(1, 1, 28, 28))
            with work.counting() as inner:
                model(torch.zeros(1, 1, 28, 28))
        assert work._hook is None and not work._tallies.items()
        model(torch.zeros(1, 1, 28, 28))  # no hook left behind
    assert (outer.macs, inner.macs) == (2 * LENET5_MACS, LENET5_MACS)


def test_tallies_of_two_threads_count_apart():
    """Two stages run in threads of one process: each tally counts its own thread's
    passes (batches of 1 and 3), and the hook goes when the last tally closes."""
    model = LeNet5((1, 28, 28)).eval()
    both_open = threading.Barrier(2)
    counted = {}

    def stage(rows: int) -> None:
        with work.counting() as tally, torch.no_grad():
            both_open.wait()
            model(torch.zeros(rows, 1, 28, 28))
            both_open.wait()
        counted[rows] = tally.macs

    threads = [threading.Thread(target=stage, args=(rows,)) for rows in (1, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counted == {1: LENET5_MACS, 3: 3 * LENET5_MACS}
    assert work._hook is None


def test_an_export_inside_a_tally_keeps_its_dynamic_batch_and_counts_nothing():
    """A stage logs its model as a torch.export program while its work is counted: the
    count must not read the traced (symbolic) batch size, which would pin the program
    to the example's batch, and a trace runs no work."""
    model = LeNet5((1, 28, 28)).eval()
    with work.counting() as tally:
        program = torch.export.export(model, (torch.zeros(8, 1, 28, 28),),
                                      dynamic_shapes=({0: torch.export.Dim("batch")},))
    assert tally.macs == 0
    x = torch.randn(3, 1, 28, 28)
    torch.testing.assert_close(program.module()(x), model(x))


def test_the_neighbour_search_counts_every_query_against_every_bank_row():
    queries, bank = torch.randn(1500, 8), torch.randn(700, 8)
    with work.counting() as tally:
        nearest_rows(queries, bank, 3)
    assert tally.macs == 1500 * 700 * 8


def test_the_training_loop_records_each_epochs_work():
    """Two full batches of 4 per epoch (the last 2 of 10 rows dropped): 8 training
    images through LeNet-5 each epoch, the same every epoch."""
    model = LeNet5((1, 28, 28))
    images = torch.zeros(10, 1, 28, 28)
    loop = TrainingLoop(model.parameters(), 2, 1e-3, 0.0, modules=(model,))

    def step(epoch: int, idx: torch.Tensor) -> torch.Tensor:
        return loop.backward_step(model(images[idx]).pow(2).mean())

    history = loop.run(10, 4, torch.Generator().manual_seed(0), step, state=dict,
                       load_state=lambda r: None, progress=False)
    assert [h.gmac for h in history] == [8 * 3 * LENET5_MACS / 1e9] * 2
    assert math.isnan(EpochStats(1, 0.0, 0.0).gmac)  # epochs restored from a checkpoint


def test_a_runs_work_sums_its_stages_and_counts_a_cached_encoder_at_its_own():
    def rolled(pretrain: dict) -> dict:
        stages = {"build_split": {"gamma": 1.0, "work_gmac": 0.0},
                  "pretrain": {"train_seconds": 300.0, **pretrain},
                  "train_classifier": {"work_gmac": 30.0},
                  "evaluate": {"accuracy": 0.9, "work_gmac": 2.0}}
        merged = {}
        for stage, metrics in stages.items():
            merged.update(parent_rollup(stage, metrics))
        return merged

    fresh = rolled({"train_gmac": 50.0, "reused": 0.0, "work_gmac": 50.2})
    assert fresh["accuracy"] == 0.9 and "work_gmac" not in fresh
    assert work_per_seed(fresh) == pytest.approx(50.2 + 30.0 + 2.0)  # the stage did more
    cached = rolled({"train_gmac": 50.0, "reused": 1.0, "work_gmac": 0.1})
    assert work_per_seed(cached) == pytest.approx(50.0 + 30.0 + 2.0)  # what it took to train
    older = rolled({"train_gmac": float("nan"), "reused": 1.0, "work_gmac": 0.1})
    assert math.isnan(work_per_seed(older))  # a cache entry without its work
    assert math.isnan(work_per_seed({"accuracy": 0.9}))  # recorded before work was counted


def test_models_logged_from_two_threads_at_once_all_land_and_leave_counting_on(
        tracking_uri, tmp_path):
    """torch.export keeps a process-wide "compiling" flag and restores it without a lock:
    two pipelines in threads of one process, each logging its model, used to fail an
    export and could leave the flag set, after which nothing was counted (and optimiser
    steps took their traced path). pucl exports one model at a time."""
    from pucl import tracking

    ids, barrier = [], threading.Barrier(2)
    example = torch.zeros(2, 1, 28, 28).numpy()

    def log_one(i: int) -> None:
        with tracking.tracked_run(f"export-{i}", "pucl", tracking_uri, tmp_path) as run:
            barrier.wait()  # the two exports start together
            ids.append(run.log_pytorch_model(LeNet5((1, 28, 28)).eval(), "model", example))

    threads = [threading.Thread(target=log_one, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == 2 and None not in ids  # both exports landed
    assert not torch.compiler.is_compiling()
    with work.counting() as tally, torch.no_grad():
        LeNet5((1, 28, 28)).eval()(torch.zeros(1, 1, 28, 28))
    assert tally.macs == LENET5_MACS
