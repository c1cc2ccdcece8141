"""Saving and rebuilding classifier heads: a linear head, a prototype head, or either
with neighbour smoothing, described by a plain dict (kind, shape, state) so that files
never pickle classes."""

from __future__ import annotations

from torch import nn

from pucl.classify.base import LinearHead
from pucl.classify.neighbours import NeighbourHead
from pucl.classify.prototype import PrototypeHead


def describe(head: nn.Module) -> dict:
    if isinstance(head, NeighbourHead):
        return {"kind": "neighbours", "k": head.k, "base": describe(head.base),
                "bank": head.bank.cpu(), "bank_scores": head.bank_scores.cpu()}
    if isinstance(head, PrototypeHead):
        first = head.projector.net[0]
        return {"kind": "prototype", "dim": first.in_features,
                "proj_hidden": first.out_features,
                "proj_dim": head.prototypes.shape[1], "temperature": head.temperature,
                "state": head.cpu().state_dict()}
    if isinstance(head, LinearHead):
        return {"kind": "linear", "dim": head.linear.in_features,
                "state": head.cpu().state_dict()}
    raise TypeError(f"cannot describe a {type(head).__name__}")


def rebuild(spec: dict) -> nn.Module:
    """The head a `describe` dict stands for (raises KeyError / RuntimeError when the dict
    is inconsistent; callers turn that into a one-line error)."""
    if spec["kind"] == "neighbours":
        return NeighbourHead(rebuild(spec["base"]), spec["bank"], spec["k"],
                             spec["bank_scores"]).eval()
    if spec["kind"] == "prototype":
        head = PrototypeHead(spec["dim"], spec["proj_hidden"], spec["proj_dim"],
                             spec["temperature"])
    elif spec["kind"] == "linear":
        head = LinearHead(spec["dim"])
    else:
        raise KeyError(f"unknown head kind {spec['kind']!r}")
    head.load_state_dict(spec["state"])
    return head.eval()
