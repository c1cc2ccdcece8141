"""pretrain.members: several encoders on one split, each with its own classifier, whose
scores the pipeline averages. Checked against
single-encoder runs of the same seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import yaml

from pucl.artifacts.models import classifier_features, load_classifier, load_models
from pucl.classify.deployable import ServedClassifier
from pucl.data import load_dataset
from pucl.models.features import encoder_part
from pucl.params.config import load_params
from tests.conftest import copy_project
from tests.helpers import STAGES, read_metrics, stage


def deployable(project) -> ServedClassifier:
    """The classifier evaluate logs, rebuilt from the stage outputs."""
    out = project / "data"
    reads = classifier_features(out / "classifier/head.pt")
    members = load_classifier(out / "classifier/head.pt", load_models(out / "pretrain/model.pt"))
    parts = [(encoder_part(model.encoder, reads), head) for model, head in members]
    return ServedClassifier(*parts[0], others=parts[1:]).eval()


def test_members_average_the_classifiers_of_single_encoder_runs(project):
    """Two members = the single runs with pretrain.seed 0 and 1 (same split, same nnPU
    objective): the same fine-tuned weights, and the mean of their two scores."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["classifier"].update(objective="nnpu", finetune_epochs=1, features="trunk",
                                neighbours=5)
    # one view per image (test-time views have their own tests)
    params["evaluate"].update(prototype_views=0, knn_inputs=False, tta_shift=0)
    settings = load_params(project / "params.yaml")
    data = load_dataset(settings.data.dataset, root=settings.paths.data_root,
                        test_fraction=settings.data.test_fraction, seed=settings.data.seed)

    def pipeline(**pretrain):
        params["pretrain"].update(pretrain)
        (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        # the split and the prior read no pretrain param: made once, by the first run
        for name in STAGES if not (project / "data/prior/prior.json").exists() else STAGES[2:]:
            stage(project, name)
        return deployable(project), read_metrics(project), torch.load(
            project / "data/classifier/head.pt", weights_only=True)

    single = [pipeline(seed=seed) for seed in (0, 1)]
    both, metrics, saved = pipeline(seed=None, members=2)

    manifest = pd.read_parquet(project / "data/split/manifest.parquet")
    test = manifest[manifest["split"] == "test"]
    x = torch.from_numpy(data.x_test[test["index"].to_numpy()]).float() / 255.0
    y = test["y"].to_numpy()
    with torch.no_grad():
        alone = [model(x).numpy() for model, _, _ in single]
        together = both(x).numpy()
    # each member is the single run of its seed, to the bit
    for (_, _, want), got in zip(single, [saved, *saved["other_members"]], strict=True):
        for key, value in want["encoder_state"].items():
            assert torch.equal(value, got["encoder_state"][key]), key
    np.testing.assert_allclose(together, (alone[0] + alone[1]) / 2, atol=1e-6)
    assert not np.allclose(alone[0], alone[1])  # two encoders, two opinions
    assert metrics["accuracy"] == float(((together >= 0.5) == y).mean())
    assert metrics["accuracy_one_member"] == single[0][1]["accuracy"]
    history = pd.read_csv(project / "data/pretrain/history.csv")
    assert history["member"].tolist() == [0] * 2 + [1] * 2  # tiny params: 2 epochs each

    assert pd.read_csv(project / "data/classifier/history.csv")["member"].unique().tolist() \
        == [0, 1]


def test_a_one_member_classifier_averages_each_row_and_its_mirror():
    from pucl.classify.base import LinearHead

    torch.manual_seed(0)
    encoder, head = torch.nn.Flatten(), LinearHead(4)
    x = torch.rand(5, 1, 2, 2)
    model = ServedClassifier(encoder, head, mirror=True).eval()
    with torch.no_grad():
        want = model(x)
        mirrored = head(encoder((torch.flip(x, dims=[-1]) - 0.5) / 0.5))
    own = torch.softmax(head(encoder((x - 0.5) / 0.5)), dim=1)[:, 1]
    assert want.shape == (5,)
    assert torch.allclose(want, (own + torch.softmax(mirrored, dim=1)[:, 1]) / 2)


def test_encoders_pretrained_side_by_side_are_those_pretrained_here_on_as_many_threads(
        project, tmp_path):
    """pretrain.members 2 with base.fit_workers 2 on 2 threads: two worker processes of
    one thread. Their encoders, histories and the checkpoint left are what the stage
    trains here on one thread, to the bit; each is cached, and no worker folder stays."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["pretrain"].update(members=2)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for name in STAGES[:2]:  # the split and the prior, shared by both
        stage(project, name)
    here = copy_project(project, tmp_path / "here")

    def configure(where, **base):
        params["base"].update(base)
        params["paths"]["pretrain_cache"] = str(where / "cache")
        (where / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    configure(here, threads=1, fit_workers=1)
    stage(here, "pretrain", env={"PUCL_ROOT": str(here)})
    configure(project, threads=2, fit_workers=2)
    result = stage(project, "pretrain")
    assert "2 encoders side by side in 2 processes of 1 thread" in result.stderr

    out, want = project / "data/pretrain", here / "data/pretrain"
    got_model, want_model = (torch.load(d / "model.pt", weights_only=True) for d in (out, want))
    for got, expected in zip([got_model, *got_model["other_members"]],
                             [want_model, *want_model["other_members"]], strict=True):
        assert got["seed"] == expected["seed"]
        for key, value in expected["state_dict"].items():
            assert torch.equal(value, got["state_dict"][key]), key
    assert got_model["seed"] != got_model["other_members"][0]["seed"]
    pd.testing.assert_frame_equal(pd.read_csv(out / "history.csv"),
                                  pd.read_csv(want / "history.csv"))
    got_ckpt, want_ckpt = (torch.load(d / "checkpoint.pt", weights_only=True) for d in (out, want))
    assert got_ckpt["fingerprint"] == want_ckpt["fingerprint"]  # the last member's
    for key, value in want_ckpt["model"].items():
        assert torch.equal(value, got_ckpt["model"][key]), key
    assert not list(out.glob(".member*"))
    assert len(list((project / "cache").iterdir())) == 2

    again = stage(project, "pretrain")  # both cached now: nothing is trained again
    assert again.stderr.count("reusing the finished pretraining") == 2


def test_a_member_left_unfinished_resumes_whichever_way_it_trains_next(project):
    """A member's checkpoint left in its worker folder resumes it when the stage next
    trains members one after the other, and the stage's checkpoint.pt resumes it in a
    worker when they next train side by side (its resumed epochs keep no clock time)."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["pretrain"].update(members=2)

    def configure(**base):
        params["base"].update(base)
        (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    configure(threads=2, fit_workers=2)
    for name in STAGES[:3]:
        stage(project, name)
    out = project / "data/pretrain"
    finished = torch.load(out / "model.pt", weights_only=True)["other_members"][0]
    # as if the worker of member 1 had stopped after its last epoch's checkpoint
    (out / ".member1").mkdir()
    (out / "checkpoint.pt").rename(out / ".member1/checkpoint.pt")

    configure(threads=1, fit_workers=1)
    here = stage(project, "pretrain")
    assert f"resuming from {out / 'checkpoint.pt'} at epoch 2" in here.stderr
    assert not (out / ".member1").exists()
    resumed = torch.load(out / "model.pt", weights_only=True)["other_members"][0]
    for key, value in finished["state_dict"].items():
        assert torch.equal(value, resumed["state_dict"][key]), key

    configure(threads=2, fit_workers=2)  # checkpoint.pt now holds member 1's last epoch
    stage(project, "pretrain")
    timing = pd.read_csv(out / "timing.csv")
    assert timing.query("member == 1")["seconds"].isna().all()
    assert timing.query("member == 0")["seconds"].notna().all()
    assert not list(out.glob(".member*"))
