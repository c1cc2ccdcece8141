"""Device, threads and determinism: applied in one place for every stage."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

from pucl.errors import ParamsError

# the thread counts that BLAS and OpenMP runtimes read when they load
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ParamsError("base.device = 'cuda' but torch sees no CUDA device "
                          "(allowed here: auto, cpu)")
    if name not in ("cpu", "cuda"):
        raise ParamsError(f"base.device = {name!r} (allowed: auto, cpu, cuda)")
    return torch.device(name)


def limit_threads(threads: int) -> None:
    """`threads` for every thread pool a stage computes on: torch's, and the BLAS and
    OpenMP pools of numpy, scipy and faiss, loaded now (threadpoolctl) or later (their
    variables, read when a library loads). Left alone, each BLAS library sizes its pool by
    the machine's cores: the points of a sweep that run side by side, each given its share
    of the cores in base.threads, would each still start a BLAS thread per core."""
    from threadpoolctl import threadpool_limits

    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    threadpool_limits(threads)
    torch.set_num_threads(threads)


def configure(seed: int, device: str, threads: int,
              deterministic_torch: bool = True) -> torch.device:
    """Seed every generator, fix thread counts, and on CUDA ask torch for deterministic
    kernels. On the CPU the kernels used here are deterministic already (the tests compare
    reruns byte for byte), and the call would cost ~2.5 s of torch._inductor imports in
    every stage process."""
    limit_threads(threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    resolved = resolve_device(device)
    if deterministic_torch and resolved.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    return resolved


def seeded_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator on `device`: the random draws of a training loop (batch order,
    augmentations) are made where its data lives, so a CUDA loop never waits for the host.
    A CUDA stream differs from the CPU's for the same seed; each is reproducible."""
    g = torch.Generator(device=torch.device(device))
    g.manual_seed(seed)
    return g


def adam(params, lr: float, weight_decay: float) -> torch.optim.Adam:
    """Adam; on CUDA its fused kernel (one launch per step for every parameter, where a
    small model's step is otherwise a row of tiny launches), capturable, with the learning
    rate in a device tensor that schedules update in place, so a step can be replayed as
    a CUDA graph (pucl.runtime.step_graph); elsewhere torch's default, so CPU results stay as they
    were."""
    params = list(params)
    if not (params and params[0].is_cuda):
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    return torch.optim.Adam(params, lr=torch.tensor(float(lr), device=params[0].device),
                            weight_decay=weight_decay, fused=True, capturable=True)


def descend(optimizer: torch.optim.Optimizer, objective: torch.Tensor) -> None:
    """One optimiser step on `objective`: fresh gradients (set to None first, so that a
    step recorded as a CUDA graph makes them in its own memory), backward, step."""
    optimizer.zero_grad(set_to_none=True)
    objective.backward()
    optimizer.step()


# how an optimiser steps, set where it is made for its device: a checkpoint's own values
# (load_state_dict copies them too) describe the device it was written on
_STEP_FLAGS = ("capturable", "fused", "foreach")


def load_optimizer(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """optimizer.load_state_dict, keeping how this optimiser steps. Its flags go into the
    checkpoint's groups before loading, since torch places the state by the checkpoint's
    flags (a CPU checkpoint would leave Adam's step counts on the host, where a fused
    CUDA step cannot read them). Each learning rate becomes a device tensor when
    capturable (a CPU checkpoint holds floats, which a recorded CUDA graph would keep as
    constants) or a float otherwise (a CUDA checkpoint holds tensors, which torch's CPU
    Adam refuses)."""
    flags = [{k: group[k] for k in _STEP_FLAGS if k in group}
             for group in optimizer.param_groups]
    state = {**state, "param_groups": [{**saved, **own} for saved, own in
                                       zip(state["param_groups"], flags, strict=True)]}
    optimizer.load_state_dict(state)
    for group in optimizer.param_groups:
        lr = float(group["lr"])
        group["lr"] = (torch.tensor(lr, device=group["params"][0].device)
                       if group.get("capturable") else lr)


def current_lr(optimizer: torch.optim.Optimizer) -> float:
    """The first group's learning rate as a float (a device tensor on CUDA: read once)."""
    return float(optimizer.param_groups[0]["lr"])


def on_device(device: torch.device, generator: torch.Generator, *tensors: torch.Tensor
              ) -> list[torch.Tensor]:
    """The training data moved once to `device`, where the loop's generator must draw
    (batch indices and augmentations are made there); a no-op on the CPU."""
    if torch.device(device).type != generator.device.type:
        raise ValueError(f"the generator is on {generator.device.type} but training on "
                         f"{torch.device(device).type}: make it with "
                         f"pucl.runtime.device.seeded_generator(seed, device)")
    return [t.to(device) for t in tensors]


def from_host(array: np.ndarray, device: torch.device | str) -> torch.Tensor:
    """A host array (batch indices drawn by numpy, say) on `device` without waiting: on
    CUDA it is pinned and copied asynchronously, where a copy from pageable memory would
    first wait for every kernel already queued."""
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if torch.device(device).type != "cuda":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)


def epoch_order(n: int, generator: torch.Generator) -> torch.Tensor:
    """A random permutation of range(n), drawn on the generator's device."""
    return torch.randperm(n, generator=generator, device=generator.device)


class LossSum:
    """An epoch's losses summed where they are computed: adding one never waits for the
    device, and `mean()` reads the sum back once. Summed in float64 in step order, which
    is what summing the per-step floats on the host gave."""

    def __init__(self) -> None:
        self.total: torch.Tensor | float = 0.0
        self.steps = 0

    def add(self, loss: torch.Tensor | None, count: bool = True) -> None:
        if loss is not None:
            self.total = self.total + loss.detach().to(torch.float64)
        self.steps += int(count)

    def mean(self) -> float:
        return float(self.total) / max(self.steps, 1)
