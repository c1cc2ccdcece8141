"""Device, threads and determinism: applied in one place for every stage."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

from pucl.errors import ParamsError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ParamsError("base.device = 'cuda' but torch sees no CUDA device "
                          "(allowed here: auto, cpu)")
    if name not in ("cpu", "cuda"):
        raise ParamsError(f"base.device = {name!r} (allowed: auto, cpu, cuda)")
    return torch.device(name)


def configure(seed: int, device: str, threads: int, deterministic_torch: bool = True
              ) -> torch.device:
    """Seed every generator, fix thread counts, and on CUDA ask torch for deterministic
    kernels. On the CPU the kernels used here are deterministic already (the tests compare
    reruns byte for byte), and the call would cost ~2.5 s of torch._inductor imports in
    every stage process."""
    torch.set_num_threads(threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    resolved = resolve_device(device)
    if deterministic_torch and resolved.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    return resolved


def seeded_generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g
