"""head.pt: written once per head (no second copy of its weights), and files from before
heads had kinds still load with the same predictions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pucl.artifacts.models import load_classifier
from pucl.classify.base import LinearHead
from pucl.classify.heads import describe
from pucl.errors import DataError


def load_head(path):
    """The head of a head file alone (no encoder was fine-tuned: the model passes
    through)."""
    return load_classifier(path, [None])[0][1]


def _head() -> LinearHead:
    torch.manual_seed(0)
    head = LinearHead(4)
    head.mean.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
    head.scale.copy_(torch.tensor([1.0, 2.0, 0.5, 1.5]))
    return head


def test_current_and_legacy_head_files_give_the_same_scores(tmp_path):
    head = _head()
    x = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    torch.save({"head": describe(head), "encoder_state": None}, tmp_path / "head.pt")
    torch.save({"state_dict": head.state_dict(), "dim": 4}, tmp_path / "legacy.pt")
    want = head.positive_score(x)
    for name in ("head.pt", "legacy.pt"):
        np.testing.assert_allclose(load_head(tmp_path / name).positive_score(x), want,
                                   rtol=0, atol=0)


def test_a_file_without_a_head_is_refused_in_one_line(tmp_path):
    torch.save({"encoder_state": None}, tmp_path / "head.pt")
    with pytest.raises(DataError, match="is not a classifier written by the "
                                        "train_classifier stage"):
        load_head(tmp_path / "head.pt")


def test_equal_content_gives_equal_bytes(tmp_path):
    """write_torch names the archive inside the file the same whatever temporary file it
    went through: a rerun that trains the same weights leaves DVC nothing to recompute."""
    from pucl.io import write_torch

    content = {"state": _head().state_dict(), "features": "encoder"}
    write_torch(tmp_path / "a" / "head.pt", content)
    write_torch(tmp_path / "b" / "head.pt", content)
    assert (tmp_path / "a/head.pt").read_bytes() == (tmp_path / "b/head.pt").read_bytes()
    loaded = torch.load(tmp_path / "a/head.pt", weights_only=True)
    assert torch.equal(loaded["state"]["mean"], content["state"]["mean"])
    # what torch.save does with the path of a temporary file (as before write_torch)
    for name in (".head.pt.k3j1x9.tmp", ".head.pt.p0q7m2.tmp"):  # mkstemp's random names
        torch.save(content, tmp_path / name)
    assert (tmp_path / ".head.pt.k3j1x9.tmp").read_bytes() \
        != (tmp_path / ".head.pt.p0q7m2.tmp").read_bytes()
