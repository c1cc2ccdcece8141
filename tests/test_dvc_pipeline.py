"""`dvc repro` on a throw-away copy with tiny params: completes, is idempotent and reruns
only what a param change touches."""

from __future__ import annotations

import re

import yaml

from tests.helpers import dvc, read_metrics


def ran_and_skipped(output: str) -> tuple[set[str], set[str]]:
    ran = set(re.findall(r"Running stage '([^']+)'", output))
    skipped = set(re.findall(r"Stage '([^']+)' didn't change", output))
    return ran, skipped


def test_repro_is_idempotent_and_selective(project):
    first = dvc(project, "repro")
    ran, _ = ran_and_skipped(first.stdout)
    assert ran == {"build_split", "estimate_prior", "pretrain", "reestimate_prior",
                   "pupl_label", "train_classifier", "evaluate"}
    metrics_first = read_metrics(project)
    assert (project / "dvc.lock").exists()

    status = dvc(project, "status", "--json")
    assert status.stdout.strip() in ("{}", "")
    again = dvc(project, "repro")
    assert ran_and_skipped(again.stdout)[0] == set()

    # A change to the classifier reruns it and what follows, nothing before it.
    # (Determinism, pretraining included, is test_flows' flow-vs-repro check: the same
    # params run by the flow in another directory give these metrics to the last bit.)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["classifier"]["epochs"] += 1
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    changed = dvc(project, "repro")
    ran, skipped = ran_and_skipped(changed.stdout)
    assert ran == {"train_classifier", "evaluate"}
    assert skipped == {"build_split", "estimate_prior", "pretrain", "reestimate_prior",
                       "pupl_label"}
    assert read_metrics(project) != metrics_first  # the rerun wrote its own metrics
