"""The device path (base.device), checked on the CPU: the code a GPU runs is the code
these tests run with `base.device: cpu`. The few checks that need CUDA skip with a reason
where torch sees none."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from pucl.classify.finetune import FinetuneSettings, finetune
from pucl.classify.linear import LinearHead, LinearSettings, train_linear_head, train_pu_head
from pucl.classify.neighbours import NeighbourHead
from pucl.data.augment import AffineJitter, FeatureNoise
from pucl.losses import CONTRASTIVE_LOSSES
from pucl.models import ContrastiveModel
from pucl.pretraining.contrastive import PretrainSettings, train_contrastive
from pucl.prior.heldout import HeldOutParams, heldout_scores, roll_index
from pucl.runtime.device import configure, load_optimizer, seeded_generator
from pucl.runtime.step_graph import COUNTS, GraphedStep, eager
from tests.conftest import tiny_params

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
CPU = torch.device("cpu")


def images(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 1, 28, 28), generator=g, dtype=torch.uint8)


def pretrain(x: torch.Tensor, epochs: int, batch: int, device=CPU, seed: int = 0):
    torch.manual_seed(seed)
    model = ContrastiveModel("lenet5", (1, 28, 28), 64, 32)
    labelled = torch.zeros(len(x), dtype=torch.bool)
    labelled[: len(x) // 4] = True
    history = train_contrastive(model, CONTRASTIVE_LOSSES.get("pucl").build(temperature=0.5),
                                x, labelled, AffineJitter(hflip=0.5),
                                PretrainSettings(epochs, batch, 1e-3, 1e-5),
                                seeded_generator(seed, device), device, progress=False)
    return model, history


class HostReads:
    """Counts reads of a tensor's value into Python (each one waits for the device) made
    by pucl's own code, by wrapping the Tensor methods that do them."""

    METHODS = ("__float__", "__int__", "__bool__", "__index__", "item", "tolist", "numpy",
               "cpu")

    def __init__(self, monkeypatch):
        self.count = 0
        source = str(Path(__import__("pucl").__file__).parent)
        for name in self.METHODS:
            original = getattr(torch.Tensor, name)

            def wrapped(tensor, *args, _original=original, **kwargs):
                if sys._getframe(1).f_code.co_filename.startswith(source):
                    self.count += 1
                return _original(tensor, *args, **kwargs)

            monkeypatch.setattr(torch.Tensor, name, wrapped)


def reads_during(monkeypatch, work) -> int:
    with monkeypatch.context() as patch:
        counter = HostReads(patch)
        work()
        return counter.count


def test_training_loops_read_back_once_per_epoch_not_per_step(monkeypatch):
    """Doubling the steps of an epoch adds no host reads: losses stay on the device."""
    torch.set_num_threads(1)
    one, two = images(128), images(256)
    assert reads_during(monkeypatch, lambda: pretrain(one, 1, 32)) == \
        reads_during(monkeypatch, lambda: pretrain(two, 1, 32)) > 0

    feats = np.random.default_rng(0).normal(size=(512, 8)).astype(np.float32)
    labels = (feats[:, 0] > 0).astype(np.int64)
    settings = LinearSettings(1, 1e-2, 0.0, 32)
    head_reads = [reads_during(monkeypatch, lambda n=n: train_linear_head(
        feats[:n], labels[:n], settings, seeded_generator(0), progress=False))
        for n in (256, 512)]
    pu_reads = [reads_during(monkeypatch, lambda n=n: train_pu_head(
        feats[:32], feats[32:n], 0.4, "nnpu", settings, seeded_generator(0), progress=False))
        for n in (256, 512)]
    assert head_reads[0] == head_reads[1] and pu_reads[0] == pu_reads[1]

    def tune(n: int) -> None:
        model = ContrastiveModel("lenet5", (1, 28, 28), 64, 32)
        head = LinearHead(model.encoder.out_dim)
        finetune(model.encoder, head, images(n), FinetuneSettings(1, 1e-3, 0.0, 32),
                 AffineJitter(), seeded_generator(0), CPU, positive=torch.arange(16),
                 unlabeled=torch.arange(16, n), kind="nnpu", prior=0.4, progress=False)

    assert reads_during(monkeypatch, lambda: tune(128)) == \
        reads_during(monkeypatch, lambda: tune(256))


def test_a_generator_on_the_device_reproduces_its_draws():
    x = images(64).float() / 255
    jitter = AffineJitter(hflip=0.5)
    a, b = (jitter(x, seeded_generator(3)) for _ in range(2))
    assert torch.equal(a, b)
    assert not torch.equal(a, jitter(x, seeded_generator(4)))
    _, first = pretrain(images(96), 2, 32)
    _, again = pretrain(images(96), 2, 32)
    assert [h.loss for h in first] == [h.loss for h in again]


def test_a_step_off_cuda_is_called_as_it_is():
    """The CPU runs the very function a GPU records: every call calls it, nothing is
    recorded."""
    seen = []

    def step(x: torch.Tensor) -> torch.Tensor:
        seen.append(x.clone())
        return x * 2

    graphed = GraphedStep(step)
    for i in range(4):
        x = torch.full((3,), float(i))
        assert torch.equal(graphed(x), x * 2)
    assert len(seen) == 4 and graphed.captures == 0


@pytest.mark.parametrize("augment", [AffineJitter(), AffineJitter(hflip=0.5), FeatureNoise(),
                                     FeatureNoise(drop=0.0)], ids=repr)
def test_views_drawn_before_the_step_are_the_views_drawn_one_by_one(augment):
    """A recorded step gets its random numbers from outside (`draw`, then `apply`): drawing
    both views' numbers first must give the views, and leave the generator, as
    augmenting one view after the other does."""
    x = images(32).float() / 255 if isinstance(augment, AffineJitter) else torch.randn(32, 6)
    one_by_one, up_front = seeded_generator(5), seeded_generator(5)
    views = [augment(x, one_by_one), augment(x, one_by_one)]
    draws = [augment.draw(x.shape, up_front), augment.draw(x.shape, up_front)]
    for view, drawn in zip(views, draws, strict=True):
        assert torch.equal(view, augment.apply(x, drawn))
    assert torch.equal(one_by_one.get_state(), up_front.get_state())


def test_the_prior_networks_shift_is_torch_roll():
    """The held-out network's random translation, made as two gathers so that a step can
    be recorded, is exactly torch.roll's."""
    x = torch.rand(3, 1, 7, 9)
    for dy in range(-2, 3):
        for dx in range(-2, 3):
            rolled = x.index_select(2, torch.from_numpy(roll_index(7, dy))) \
                .index_select(3, torch.from_numpy(roll_index(9, dx)))
            assert torch.equal(rolled, torch.roll(x, shifts=(dy, dx), dims=(2, 3)))


def test_a_checkpoint_resumes_in_the_form_its_optimiser_steps_with():
    """A capturable (CUDA) Adam keeps its learning rate in a tensor that schedules update
    in place and its step counts beside the parameters; torch's CPU Adam keeps floats and
    host counts. A checkpoint from either resumes in the other (a meta device stands in
    for CUDA: it places tensors without computing)."""
    cpu = [torch.nn.Parameter(torch.zeros(2))]
    stepped = torch.optim.Adam(cpu, lr=0.02)
    cpu[0].grad = torch.ones(2)
    stepped.step()
    other = [torch.nn.Parameter(torch.zeros(2, device="meta"))]
    capturable = torch.optim.Adam(other, lr=0.5, capturable=True)
    load_optimizer(capturable, stepped.state_dict())
    group = capturable.param_groups[0]
    assert group["capturable"] and isinstance(group["lr"], torch.Tensor)
    assert group["lr"].device.type == "meta"
    assert {t.device.type for t in capturable.state[other[0]].values()} == {"meta"}

    from_cuda = torch.optim.Adam(cpu, lr=torch.tensor(0.01)).state_dict()
    on_cpu = torch.optim.Adam(cpu, lr=0.5)
    load_optimizer(on_cpu, from_cuda)
    assert type(on_cpu.param_groups[0]["lr"]) is float
    assert on_cpu.param_groups[0]["lr"] == pytest.approx(0.01)


def test_a_generator_on_another_device_than_the_data_is_refused():
    """Batch indices drawn on one device cannot index data on another: said up front."""
    with pytest.raises(ValueError, match=r"generator is on cpu but training on meta"):
        train_contrastive(ContrastiveModel("lenet5", (1, 28, 28), 64, 32),
                          CONTRASTIVE_LOSSES.get("pucl").build(temperature=0.5), images(64),
                          torch.zeros(64, dtype=torch.bool), AffineJitter(),
                          PretrainSettings(1, 32, 1e-3, 0.0), seeded_generator(0),
                          torch.device("meta"), progress=False)


def test_the_pipeline_runs_with_tracking_off_and_no_mlflow_installed(tmp_path):
    """A GPU worker without MLflow runs the in-process pipeline with PUCL_TRACKING=off:
    the stage path never imports it (an import of it fails here)."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path

        class NoMLflow:
            def find_spec(self, name, path=None, target=None):
                if name == "mlflow" or name.startswith("mlflow."):
                    raise ImportError("mlflow is not installed on this worker")

        sys.meta_path.insert(0, NoMLflow())
        from pucl.stages.runner import resolve_params, run_pipeline
        root = Path({str(tmp_path)!r})
        result = run_pipeline(resolve_params(root), root / "run", "no-mlflow")
        # the encoder's kNN probe: the tiny run's 2-means pseudo-labels are a coin flip
        # between machines (0.33 or 0.67 accuracy), its features are not (about 0.9)
        print("knn_accuracy", result.metrics["knn_accuracy"])
        assert not any(m == "mlflow" or m.startswith("mlflow.") for m in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PUCL_TRACKING": "off"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert float(done.stdout.split("knn_accuracy")[-1]) > 0.8
    assert (tmp_path / "run" / "data" / "evaluate" / "metrics.json").exists()


@CUDA
def test_cuda_training_is_reproducible_and_stays_on_the_device():
    cuda = configure(0, "cuda", 1)  # deterministic kernels, as every stage asks for
    x = images(256)
    first, h1 = pretrain(x, 2, 64, cuda)
    second, h2 = pretrain(x, 2, 64, cuda)
    assert [h.loss for h in h1] == [h.loss for h in h2]
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def _every_loop(device: torch.device) -> dict[str, list]:
    """Each training loop that records its steps, briefly, on `device`: what it returns."""
    x = images(320)
    model, history = pretrain(x, 3, 64, device)
    feats = np.random.default_rng(0).normal(size=(300, 8)).astype(np.float32)
    labels = (feats[:, 0] > 0).astype(np.int64)
    settings = LinearSettings(3, 1e-2, 0.0, 64)  # 300 rows: batches of 64 and a tail of 44
    head, head_losses = train_linear_head(feats, labels, settings,
                                          seeded_generator(0, device), progress=False)
    pu_head, pu_losses = train_pu_head(feats[:40], feats[40:], 0.4, "nnpu", settings,
                                       seeded_generator(0, device), progress=False)
    tuned_head = LinearHead(model.encoder.out_dim)
    tuned = finetune(model.encoder, tuned_head, x, FinetuneSettings(2, 1e-3, 0.0, 64),
                     AffineJitter(hflip=0.5), seeded_generator(0, device), device,
                     positive=torch.arange(40), unlabeled=torch.arange(40, 320), kind="nnpu",
                     prior=0.4, progress=False)
    rows = x.reshape(320, -1).numpy() / 255.0
    scores = heldout_scores(rows[80:], rows[:80], (1, 28, 28),
                            HeldOutParams(classifier="network", max_steps=12, eval_every=4,
                                          batch_size=32), 0, device=device)
    return {"pretrain": [h.loss for h in history], "head": head_losses, "pu_head": pu_losses,
            "finetune": tuned, "prior": list(scores.u[:20]),
            "weights": [t.cpu() for t in (*model.state_dict().values(),
                                          *head.state_dict().values(),
                                          *pu_head.state_dict().values())]}


@CUDA
def test_cuda_graphs_replay_what_the_eager_steps_compute():
    """Every loop that records its steps as CUDA graphs (pretraining, both heads,
    fine-tuning, the prior's network) gives what the same steps give run eagerly, and did
    record (a step that cannot be would warn and run eagerly: an error here)."""
    cuda = configure(0, "cuda", 1)
    recorded = COUNTS.recorded
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="a training step could not be recorded")
        graphed = _every_loop(cuda)
    assert COUNTS.recorded - recorded >= 6  # pretraining, 2 heads (+ tails), fine-tuning, prior
    with eager():
        plain = _every_loop(cuda)
    for key in ("pretrain", "head", "pu_head", "finetune", "prior"):
        np.testing.assert_allclose(graphed[key], plain[key], rtol=1e-5, atol=1e-6, err_msg=key)
    for a, b in zip(graphed["weights"], plain["weights"], strict=True):
        torch.testing.assert_close(a.float(), b.float(), rtol=1e-5, atol=1e-6)


@CUDA
def test_neighbour_smoothing_scores_on_the_device_as_on_the_cpu():
    """Smoothing compares every row with the whole bank: on CUDA a copy of the head does
    it there, with the CPU's scores, and the head itself stays on the CPU."""
    rng = np.random.default_rng(0)
    bank = torch.from_numpy(rng.normal(size=(3000, 16)).astype(np.float32))
    head = NeighbourHead(LinearHead(16), bank, k=10)
    rows = rng.normal(size=(500, 16)).astype(np.float32)
    np.testing.assert_allclose(head.positive_score(rows, "cuda"), head.positive_score(rows),
                               rtol=1e-5, atol=1e-6)
    assert head.bank.device.type == "cpu"


def test_base_threads_sizes_every_thread_pool(monkeypatch):
    """`base.threads` holds for torch and for the BLAS and OpenMP pools of numpy, scipy and
    faiss, loaded before the stage (resized) or after it (their variables): not only for
    torch, as before, when each BLAS pool kept one thread per core of the machine."""
    import faiss
    from threadpoolctl import threadpool_info, threadpool_limits

    from pucl.runtime.device import THREAD_VARIABLES

    for name in THREAD_VARIABLES:
        monkeypatch.setenv(name, "3")  # restored after the test, as the pools below
    torch_threads = torch.get_num_threads()
    try:
        with threadpool_limits(2):  # every pool loaded so far, as on a 2-core machine
            configure(0, "cpu", 1)
            pools = {(p["internal_api"], p["filepath"]): p["num_threads"]
                     for p in threadpool_info()}
            assert any(api == "openblas" for api, _ in pools), pools  # numpy's, at least
            assert set(pools.values()) == {1}, pools
            assert faiss.omp_get_max_threads() == 1
            assert torch.get_num_threads() == 1
            assert {os.environ[name] for name in THREAD_VARIABLES} == {"1"}
    finally:
        torch.set_num_threads(torch_threads)
