"""MLflow tracking: the only package that imports mlflow.

The default store is a sqlite file in the project root, resolved to an absolute path at
run time so that runs started from DVC's temporary experiment copies (`.dvc/tmp/exps/...`)
land in the same store. When the store cannot be reached, the pipeline still completes
and writes its outputs; one line says tracking is off.

Run layout: one parent run per pipeline execution (tag `kind=pipeline`), one nested run
per stage (`kind=stage`); a sweep adds a parent above its pipelines (`kind=sweep`).

- `location`: project root, store URI, version tags;
- `runs`: one run (`Run`), writing params, metrics, tags, artefacts and models;
- `store`: the store and experiment (`Store`, `open_store`, `tracked_run`, the registry);
- `dvc`: the parent run shared by the stages of one `dvc repro`;
- `registry`: model references (NAME@ALIAS, run names, URIs) and loading them.
"""

from pucl.tracking.dvc import dvc_invocation, invocation_parent
from pucl.tracking.location import (
    ROOT_ENV,
    file_digest,
    git_commit,
    project_root,
    resolve_tracking_uri,
    standard_tags,
)
from pucl.tracking.models import (
    CHAMPION,
    ModelNotFound,
    load_uri,
    load_version,
    open_registry,
    parse_reference,
    pipeline_run_models,
    resolve_version,
    use_tracking_uri,
)
from pucl.tracking.runs import PARENT_RUN_ENV, TRACKING_ENV, Run, first_line, tracking_disabled
from pucl.tracking.store import (
    RunRecord,
    Store,
    StoreUnavailable,
    UnknownExperiment,
    open_store,
    read_store,
    run_in,
    tracked_run,
    try_open_store,
)

__all__ = ["CHAMPION", "PARENT_RUN_ENV", "ROOT_ENV", "TRACKING_ENV", "ModelNotFound",
           "Run", "RunRecord", "Store", "StoreUnavailable", "UnknownExperiment", "dvc_invocation",
           "file_digest", "first_line", "git_commit", "invocation_parent", "load_uri",
           "load_version", "open_registry", "open_store", "parse_reference",
           "pipeline_run_models", "project_root", "read_store", "resolve_tracking_uri",
           "resolve_version", "run_in", "standard_tags", "tracked_run",
           "tracking_disabled", "try_open_store", "use_tracking_uri"]
