"""Where a pipeline run's time goes on this machine's device: per stage, its seconds and
the images its encoders passed (training and scoring) per second; and pretraining's
throughput against the bare model's forward + backward at the same batch size, on the
same device.

    python benchmarks/device_timing.py [--preset fmnist-i] [--variant NAME] [--seed 3]
        [--device auto] [--threads 8] [--set KEY=VALUE ...] [--out F.csv]

Without --preset it times the default params (the embedded MNIST-5k). The pipeline runs
in process with tracking off (`PUCL_TRACKING=off`): it needs torch and pucl's own
dependencies, not MLflow, Prefect or DVC. Outputs go to a temporary directory; nothing of
the project changes. `--out` appends one row per stage (and one for the whole run) to a
CSV with the commit. Commands and results: reports/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PUCL_TRACKING", "off")  # before pucl reads it

import pandas as pd  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # _commit, run as a file
from _commit import TEXT_COLUMNS, current_commit, with_commit  # noqa: E402

from pucl.models.encoders import CNN7, LeNet5, MLPEncoder, ResNet18  # noqa: E402
from pucl.params.config import parse_assignments  # noqa: E402
from pucl.runtime.device import resolve_device  # noqa: E402
from pucl.runtime.progress import listening  # noqa: E402
from pucl.runtime.step_graph import COUNTS, GraphedStep  # noqa: E402
from pucl.stages.runner import call_stage, resolve_params, run_pipeline  # noqa: E402

ENCODERS = (LeNet5, MLPEncoder, CNN7, ResNet18)


class EncoderImages:
    """Images through any encoder's forward pass (a global forward hook): what a stage
    asked of the device, whatever the step (training views, features, test views)."""

    def __init__(self) -> None:
        self.count = 0
        self.shape: tuple[int, ...] = ()  # one input's shape, as the encoders saw it
        self.handle = torch.nn.modules.module.register_module_forward_hook(self._seen)

    def _seen(self, module, inputs, output) -> None:
        if isinstance(module, ENCODERS):
            self.count += int(inputs[0].shape[0])
            self.shape = tuple(inputs[0].shape[1:])


def loop_seconds(start: float, events: list[tuple[float, dict]]) -> list[tuple[str, str, float]]:
    """(loop, its epochs done / total, seconds) for each loop a stage reported, in order: a
    loop's time runs from the previous loop's last event (or the stage's start) to its
    own last event."""
    loops: list[list] = []  # [name, "done/total", time of its last event]
    for t, event in events:
        if "step" not in event:
            continue
        latest = [event["step"], f"{event['done']}/{event['total']}", t]
        if loops and loops[-1][0] == event["step"]:
            loops[-1] = latest
        else:
            loops.append(latest)
    begins = [start, *(end for _, _, end in loops)][:len(loops)]
    return [(name, done, end - begin) for (name, done, end), begin in
            zip(loops, begins, strict=True)]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def bare_images_per_s(params, shape: tuple[int, ...], device: torch.device,
                      graphed: bool = False, steps: int = 40) -> float:
    """The pretraining model's forward + backward alone, on two pre-made batches of
    pretrain.batch_size views already on the device: the most pretraining can reach.
    `graphed`: each forward + backward replayed as one CUDA graph, as pretraining's steps
    are on a GPU (the floor without launch costs)."""
    from pucl.recipe import Recipe
    from pucl.recipe.pretraining import contrastive_model

    model = contrastive_model(Recipe.of(params), shape).to(device).train()
    x = torch.rand((2 * params.pretrain.batch_size, *shape), device=device) * 2 - 1

    def forward_backward(views: torch.Tensor) -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        loss = model(views).square().mean()
        loss.backward()
        return loss.detach()

    step = GraphedStep(forward_backward) if graphed else forward_backward
    for i in range(steps + 5):
        if i == 5:  # after the warm-up: allocator, kernels chosen, graph recorded
            synchronize(device)
            start = time.perf_counter()
        step(x)
    synchronize(device)
    return steps * len(x) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", help="a preset's recommended (or --variant) settings")
    parser.add_argument("--variant")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="params override KEY=VALUE (repeatable)")
    parser.add_argument("--out", type=Path, help="append the rows to this CSV")
    args = parser.parse_args()

    overrides: dict = {}
    label = "default"
    if args.preset:
        from pucl.params.presets import load_preset
        from pucl.params.sweeps import variant_overrides

        label, overrides = variant_overrides(load_preset(args.preset), args.variant)
        label = f"{args.preset}:{label}"
    overrides.update({"base.seed": args.seed, "base.device": args.device,
                      "base.threads": args.threads, "paths.pretrain_cache": None,
                      **parse_assignments(args.overrides)})
    params = resolve_params(ROOT, overrides)
    commit = current_commit()  # the code that runs: files edited during the run do not count
    device = resolve_device(params.base.device)
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    print(f"{label}, seed {args.seed}: {name}, {params.base.threads} threads, "
          f"torch {torch.__version__}", flush=True)

    counter, rows = EncoderImages(), []

    def timed(stage, stage_params, workdir, progress, parent):
        before, events, start = counter.count, [], time.perf_counter()
        with listening(lambda event: events.append((time.perf_counter(), event))):
            out = call_stage(stage, stage_params, workdir, progress, parent)
        synchronize(device)
        seconds = time.perf_counter() - start
        images = counter.count - before
        rows.append({"stage": stage, "seconds": round(seconds, 2), "encoder_images": images,
                     "images_per_s": round(images / seconds) if images else None})
        print(f"  {stage:<17}{seconds:8.1f} s  {images:>11,} encoder images"
              + (f"  {images / seconds:>10,.0f} /s" if images else ""), flush=True)
        for loop, done, loop_s in loop_seconds(start, events):
            print(f"    {loop:<24}{loop_s:8.1f} s  ({done})", flush=True)
            rows.append({"stage": f"{stage}: {loop}", "seconds": round(loop_s, 2)})
        return out

    with tempfile.TemporaryDirectory(prefix="pucl-device-") as workdir:
        start = time.perf_counter()
        result = run_pipeline(params, Path(workdir), "device-timing", stage_call=timed)
        total = time.perf_counter() - start
        timing = pd.read_csv(Path(workdir) / params.paths.pretrain / "timing.csv")
    counter.handle.remove()
    # pretraining's own rate: its epochs' augmented views through forward + backward per s
    # (the first epoch, which pays for warm-up, left out when there are more)
    rates = timing["images_per_s"].dropna().tolist()
    pretrain_rate = statistics.median(rates[1:] or rates)
    bare = bare_images_per_s(params, counter.shape, device)
    # on CUDA also the bare step as one graph; elsewhere the two are the same code
    bare_graphed = (bare_images_per_s(params, counter.shape, device, graphed=True)
                    if device.type == "cuda" else bare)
    metrics = result.metrics
    print(f"  {'whole run':<17}{total:8.1f} s   accuracy {metrics['accuracy']:.4f}, "
          f"prior {metrics['prior_estimate']:.3f}")
    print(f"pretraining {pretrain_rate:,.0f} images/s vs bare forward + backward "
          f"{bare:,.0f} images/s at batch {params.pretrain.batch_size}: ratio "
          f"{pretrain_rate / bare:.2f}; vs the bare step as a CUDA graph {bare_graphed:,.0f} "
          f"images/s: ratio {pretrain_rate / bare_graphed:.2f}")
    print(f"training steps recorded as CUDA graphs: {COUNTS.recorded}, "
          f"could not be recorded: {COUNTS.failed}")
    if args.out:
        # no precision column: pucl computes in float32 only (older rows keep theirs)
        common = {"run": label, "seed": args.seed, "device": name,
                  "threads": params.base.threads}
        rows.append({"stage": "whole run", "seconds": round(total, 2),
                     "accuracy": round(metrics["accuracy"], 4),
                     "pretrain_images_per_s": round(pretrain_rate),
                     "bare_images_per_s": round(bare),
                     "pretrain_vs_bare": round(pretrain_rate / bare, 3),
                     "bare_graphed_images_per_s": round(bare_graphed),
                     "graphs_recorded": COUNTS.recorded, "graphs_failed": COUNTS.failed})
        frame = with_commit(pd.DataFrame([{**common, **row} for row in rows]), commit)
        if args.out.exists():
            frame = pd.concat([pd.read_csv(args.out, dtype=TEXT_COLUMNS), frame], ignore_index=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
