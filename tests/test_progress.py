"""Progress you can see while a sweep runs: epoch events from the training loops
(pucl.runtime.progress), a point's progress file, and the sweep's one line per change."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import numpy as np

from pucl.classify.linear import LinearSettings, train_linear_head
from pucl.flows._progress import PROGRESS_FILE, PointProgress, SweepWatch
from pucl.runtime.device import seeded_generator
from pucl.runtime.progress import EpochBar, listening, report


def test_training_loops_report_each_epoch_to_a_listener():
    events = []
    feats = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    with listening(events.append):
        train_linear_head(feats, (feats[:, 0] > 0).astype(np.int64),
                          LinearSettings(3, 1e-2, 0.0, 16), seeded_generator(0), progress=False)
    assert events == [{"step": "classifier", "done": k, "total": 3} for k in (1, 2, 3)]
    train_linear_head(feats, (feats[:, 0] > 0).astype(np.int64),
                      LinearSettings(1, 1e-2, 0.0, 16), seeded_generator(0), progress=False)
    assert len(events) == 3  # nobody listens after the block


def test_listeners_hear_only_their_own_thread():
    heard: dict[str, list] = {"a": [], "b": []}

    def work(name: str) -> None:
        with listening(heard[name].append):
            for _ in EpochBar(2, name, disable=True):
                pass

    threads = [threading.Thread(target=work, args=(n,)) for n in heard]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert heard == {n: [{"step": n, "done": 1, "total": 2}, {"step": n, "done": 2, "total": 2}]
                     for n in heard}


def test_a_points_progress_file_follows_its_stage_and_epochs(tmp_path):
    path = tmp_path / PROGRESS_FILE
    progress = PointProgress(path, min_interval=3600)  # only stage changes write now
    with listening(progress):
        report(stage="pretrain")
        assert json.loads(path.read_text()) == {"stage": "pretrain"}
        report(step="pretrain", done=1, total=50)  # inside the interval: kept, not written
        assert json.loads(path.read_text()) == {"stage": "pretrain"}
    progress.min_interval = 0
    progress({"step": "pretrain", "done": 2, "total": 50})
    assert json.loads(path.read_text()) == {"stage": "pretrain", "step": "pretrain",
                                            "done": 2, "total": 50}
    progress({"stage": "pupl_label"})  # a new stage forgets the last one's loop
    assert json.loads(path.read_text()) == {"stage": "pupl_label"}
    progress.remove()
    assert not path.exists()


@dataclass
class State:
    name: str

    def is_final(self) -> bool:
        return self.name in ("COMPLETED", "FAILED")

    def is_running(self) -> bool:
        return self.name == "RUNNING"


@dataclass
class Point:
    """What SweepWatch reads of a Prefect future: its state."""

    state: State


def test_a_sweep_logs_one_line_per_change(tmp_path):
    names = ["s0", "s1", "s2"]
    dirs = [tmp_path / n for n in names]
    lines: list[str] = []
    watch = SweepWatch(names, dirs, lines.append, min_interval=0)
    futures = [Point(State("RUNNING")), Point(State("PENDING")), None]
    watch.poll(futures)
    progress = PointProgress(dirs[0] / PROGRESS_FILE, 0)
    progress({"stage": "pretrain"})
    progress({"step": "pretrain", "done": 3, "total": 50})
    watch.poll(futures)
    watch.poll(futures)  # nothing moved: no line
    futures[0].state = State("COMPLETED")
    futures[1].state = State("RUNNING")
    watch.poll(futures)
    assert lines == [
        "0/3 points done, 1 running, 2 queued: s0",
        "0/3 points done, 1 running, 2 queued: s0 (pretrain: pretrain 3/50)",
        "1/3 points done, 1 running, 1 queued: s1",
    ]


def test_a_moving_point_logs_at_most_once_per_interval_but_counts_at_once(tmp_path):
    lines: list[str] = []
    watch = SweepWatch(["s0", "s1"], [tmp_path / "s0", tmp_path / "s1"], lines.append,
                       min_interval=3600)
    futures = [Point(State("RUNNING")), Point(State("PENDING"))]
    progress = PointProgress(tmp_path / "s0" / PROGRESS_FILE, 0)
    progress({"stage": "pretrain"})
    watch.poll(futures)
    for epoch in range(1, 5):  # epochs move within the interval: no new line
        progress({"step": "pretrain", "done": epoch, "total": 50})
        watch.poll(futures)
    futures[0].state = State("COMPLETED")  # a count changed: logged at once
    watch.poll(futures)
    assert lines == ["0/2 points done, 1 running, 1 queued: s0 (pretrain)",
                     "1/2 points done, 0 running, 1 queued"]


def test_a_loop_projected_to_run_long_says_so_once_after_its_first_epoch(monkeypatch):
    import pytest
    import torch

    import pucl.pretraining.loop as loop

    monkeypatch.setattr(loop, "SLOW_MINUTES", -1.0)  # every loop counts as long here
    layer = torch.nn.Linear(2, 1)
    training = loop.TrainingLoop(layer.parameters(), epochs=3, lr=0.01, weight_decay=0.0,
                                 modules=(layer,))

    def step(epoch, idx):
        return training.backward_step(layer(torch.ones(len(idx), 2)).sum())

    with pytest.warns(loop.SlowRunWarning, match="the 2 epochs left will take about") as seen:
        training.run(8, 4, torch.Generator().manual_seed(0), step, dict, lambda state: None,
                     progress=False)
    assert len([w for w in seen if w.category is loop.SlowRunWarning]) == 1


def test_the_projection_is_the_first_epochs_pace_times_the_epochs_left():
    import warnings

    import pytest

    from pucl.pretraining.loop import EpochStats, SlowRunWarning, warn_if_slow

    first = EpochStats(1, 0.5, 0.01, seconds=30.0, images_per_s=65.0)
    with pytest.warns(SlowRunWarning, match=r"30 s \(65 images/s\), so the 40 epochs left "
                                            r"will take about 20 minutes"):
        warn_if_slow("pretrain", first, 40)  # 30 s x 40 = 20 minutes
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_slow("pretrain", first, 19)  # 9.5 minutes: under the bar, nothing said
