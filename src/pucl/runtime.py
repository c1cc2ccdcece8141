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
    """Seed every generator, fix thread counts, and (for stages that compute with torch)
    ask torch for deterministic kernels; that call alone costs ~2 s of imports."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    torch.set_num_threads(threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if deterministic_torch:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    return resolve_device(device)


def seeded_generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g
