"""Shared fixtures. Tests never touch the network, the project's mlflow.db or data/."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from pucl.flows._server import SERVER_STARTUP_TIMEOUT_S
from pucl.params.config import load_yaml
from pucl.runtime.environment import quiet_defaults

ROOT = Path(__file__).resolve().parents[1]

quiet_defaults()  # libraries' telemetry off, passive OpenMP threads

# A Prefect home away from the user's, inherited by the parallel workers (pytest-xdist): the
# servers that tests of pucl's own server start keep their database there.
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="pucl-tests-prefect-"))
PARALLEL = "PYTEST_XDIST_WORKER" in os.environ
# where the session's Prefect server leaves a copy of its new tables (`migrated_prefect_home`)
PREFECT_DB_TEMPLATE_ENV = "PUCL_TESTS_PREFECT_DB"
if PARALLEL:
    # One BLAS and OpenMP thread per worker, and per command a test starts: the workers
    # already fill the cores, and two threads per worker cost CPU time waiting on each other
    from threadpoolctl import threadpool_limits

    from pucl.runtime.device import THREAD_VARIABLES

    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")

    threadpool_limits(1)  # the libraries loaded so far (torch and numpy among them)

# Small but real settings: every stage runs its true code path in seconds.
TINY_PARAMS = {
    # one torch thread per process when the tests share the cores between workers
    "base": {"seed": 0, "threads": 1 if PARALLEL else 2},
    # off, so that reruns really retrain (determinism tests); test_stages turns it on
    "paths": {"pretrain_cache": None},
    # a validation part: `auto` would cross-fit these 4,000 rows, 5 more classifier fits
    # in every pipeline test (test_crossfit runs auto end to end). U a seeded draw of
    # 1,000 of them: every training stage reads about a quarter of the rows, and every
    # pipeline test takes the cap's path; tests of what all rows give set it to None
    "split": {"n_p": 200, "folds": 0, "max_unlabeled": 1000},
    # TED^n on a logistic P-vs-U scorer of 10 principal components: the held-out network
    # and CVIR are test_prior_heldout's, and the network costs every pipeline test about
    # 3 s; 50 components (the default) cost it about 1.5 s more
    "prior": {"km": {"max_per_side": 300, "bandwidth_multipliers": [0.3162, 0.5623, 1.0]},
              "heldout": {"classifier": "logistic", "cvir_rounds": 1, "pca_dim": 10}},
    "pretrain": {"epochs": 2, "batch_size": 256},
    "pupl": {"kmeans": {"restarts": 3}},
    "classifier": {"epochs": 3},
    # one view per test image: 9 translated views cost every pipeline test its export time;
    # test_flows and the test-time view tests turn them on
    "evaluate": {"embedding": "pca", "embedding_points": 200, "tta_shift": 0},
}


def deep_update(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = deep_update(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


def tiny_params(**overrides) -> dict:
    raw = load_yaml((ROOT / "params.yaml").read_text())
    return deep_update(deep_update(raw, TINY_PARAMS), overrides)


_EMPTY_STORE: list[Path] = []  # one per test process, made on first use


def new_store(path: Path) -> str:
    """The sqlite URI of a new, empty MLflow store at `path`. MLflow takes about 2 s to
    create the tables of a store, and tests create dozens: each gets a copy of one store
    made by MLflow itself in this process."""
    if not _EMPTY_STORE:
        from mlflow.tracking import MlflowClient

        made = Path(tempfile.mkdtemp(prefix="pucl-tests-mlflow-")) / "empty.db"
        MlflowClient(f"sqlite:///{made}").search_experiments()  # creates the tables
        _EMPTY_STORE.append(made)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_EMPTY_STORE[0], path)
    return f"sqlite:///{path}"


@pytest.fixture
def tracking_uri(tmp_path, monkeypatch) -> str:
    uri = new_store(tmp_path / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


_PROJECT_TEMPLATE: list[Path] = []  # one per test process, made on first use
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}


def project_template() -> Path:
    """What every test project shares (code, dvc.yaml, the empty tracked dataset, the DVC
    remote's config) as a committed git + DVC repo. `dvc init` and committing the code
    cost a test about a second a project, and tests make dozens: each copies this one."""
    if not _PROJECT_TEMPLATE:
        dest = Path(tempfile.mkdtemp(prefix="pucl-tests-project-")) / "proj"
        dest.mkdir()
        for name in ("src", "dvc.yaml", ".dvcignore", "pyproject.toml",
                     "prefect.yaml", "prefect-automations.yaml"):
            src = ROOT / name
            if src.is_dir():
                shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
            elif src.exists():
                shutil.copy2(src, dest / name)
        (dest / "data" / "dataset").mkdir(parents=True)  # git-tracked, like in a clone
        shutil.copy2(ROOT / "data" / "dataset" / "README.md", dest / "data" / "dataset")
        (dest / ".gitignore").write_text((ROOT / ".gitignore").read_text())
        env = {**os.environ, "PATH": python_path(), **GIT_ENV}
        subprocess.run(["git", "init", "-q"], cwd=dest, check=True, env=env)
        subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=dest, check=True,
                       env=env)
        shutil.copy2(ROOT / ".dvc" / "config", dest / ".dvc" / "config")  # the local remote
        subprocess.run(["git", "add", "-A"], cwd=dest, check=True, env=env)
        subprocess.run(["git", "commit", "-qm", "init"], cwd=dest, check=True, env=env)
        _PROJECT_TEMPLATE.append(dest)
    return _PROJECT_TEMPLATE[0]


def make_project(dest: Path, params: dict | None = None) -> Path:
    """A throw-away copy of the project (`project_template`) with tiny params, or
    `params`, committed."""
    shutil.copytree(project_template(), dest, symlinks=True)
    (dest / "params.yaml").write_text(yaml.safe_dump(params or tiny_params(), sort_keys=False))
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "add", "params.yaml"], cwd=dest, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "params"], cwd=dest, check=True, env=env)
    return dest


def python_path() -> str:
    """PATH with this interpreter first: DVC stages run `python -m pucl.stages <name>`."""
    return f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"


@pytest.fixture(scope="session")
def finished_tiny(tmp_path_factory) -> Path:
    """One tiny project whose six stages ran to the end (in this process) and whose outputs
    DVC committed (dvc.lock and its cache, as `dvc repro` leaves them): built once per test
    session, shared by the parallel workers through a file lock. Tests take a copy
    (`copy_project`), never change it."""
    from filelock import FileLock

    from tests.helpers import STAGES, dvc, stage

    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if PARALLEL else base) / "finished-tiny"  # one per session
    with FileLock(f"{shared}.lock"):
        if not (shared / "done").exists():
            shutil.rmtree(shared, ignore_errors=True)
            with pytest.MonkeyPatch.context() as mp:
                root = make_project(shared / "proj")
                mp.setenv("PUCL_ROOT", str(root))
                mp.setenv("MLFLOW_TRACKING_URI", new_store(shared / "mlflow.db"))
                mp.setenv("PATH", python_path())
                for name in STAGES:
                    stage(root, name)
                dvc(root, "commit", "--force")
            (shared / "done").touch()
    return shared / "proj"


def copy_project(source: Path, dest: Path, drop: tuple[str, ...] = ()) -> Path:
    """A copy of a project (git, DVC cache and all) at `dest`, without the outputs of the
    stages in `drop`, as if those had not run."""
    shutil.copytree(source, dest, symlinks=True)
    for section in drop:
        shutil.rmtree(dest / "data" / section, ignore_errors=True)
    return dest


@pytest.fixture
def project(tmp_path, tracking_uri, monkeypatch) -> Path:
    dest = make_project(tmp_path / "proj")
    monkeypatch.setenv("PUCL_ROOT", str(dest))
    monkeypatch.setenv("PATH", python_path())
    return dest


# Parallel workers take whole test files in collection order (the Makefile turns off
# xdist's own reordering, by number of tests): the longest files first, so that no worker
# is left with one long file when the others are done. Longest first, by --durations.
SLOWEST_FIRST = ("test_flows.py", "test_sweep_flows.py", "test_server_reaper.py",
                 "test_production.py", "test_cli.py", "test_production_pu.py",
                 "test_finetune.py", "test_other_methods.py", "test_stages.py",
                 "test_faults.py", "test_estimators.py", "test_registries.py",
                 "test_resume.py", "test_members.py", "test_km2.py", "test_orphans.py",
                 "test_one_recipe.py", "test_device_path.py", "test_own_data.py",
                 "test_tabular_benchmark.py", "test_crossfit.py", "test_safe_loading.py",
                 "test_tabular_floor.py", "test_paired.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: rest in order


# -- one Prefect server for the session, a tracked project per module, for flow tests -----

def pytest_configure(config):
    """One temporary Prefect server for the whole test session, started by the process
    that starts the others (xdist's controller, or the only process): its URL reaches the
    workers through the environment they inherit, so flows in tests and in the `pucl`
    commands they start report to it instead of starting a server each (10 s apiece).
    It starts in the background while the workers start and collect; each waits for it
    before its first test (`pytest_collection_finish`). Tests of pucl's own server start
    remove PREFECT_API_URL (test_server_reaper), and start it on a copy of this server's
    database as it stood when it first answered (`migrated_prefect_home`)."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller's server, through the environment
    import socket
    import threading

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # before Prefect is imported, so that this process's own settings name it too
    os.environ["PREFECT_API_URL"] = f"http://127.0.0.1:{port}/api"
    # named now, written once the server has built its tables: the workers inherit the name
    template = Path(tempfile.mkdtemp(prefix="pucl-tests-prefect-db-")) / "migrated.db"
    os.environ[PREFECT_DB_TEMPLATE_ENV] = str(template)
    started: dict = {}

    def start() -> None:
        from pucl.flows._reaper import watch

        db = template.with_name("prefect.db")
        started["server"] = server = ephemeral_prefect_server(port, db)
        started["reaper"] = watch(server.pid)  # gone with pytest
        wait_for_prefect(os.environ["PREFECT_API_URL"], server)
        # its tables before any test wrote to them (sqlite's online backup: the server has
        # the file open), renamed into place whole
        partial = template.with_suffix(".partial")
        with sqlite3.connect(db) as source, sqlite3.connect(partial) as copy:
            source.backup(copy)
        partial.replace(template)

    thread = threading.Thread(target=start, name="prefect-server", daemon=True)
    thread.start()
    config.pucl_prefect = (thread, started)


def ephemeral_prefect_server(port: int, db: Path) -> subprocess.Popen:
    """The temporary Prefect server a `pucl` command starts (no UI, no services), on
    `port` and the sqlite database `db`, without importing Prefect here: its server module
    would cost this process about 5 s of CPU while the workers collect."""
    from pucl.flows._server import EPHEMERAL_SERVER_ENV, ephemeral_server_command

    return subprocess.Popen(ephemeral_server_command(port), env={
        **os.environ, **EPHEMERAL_SERVER_ENV,
        # the database for this server only: servers that tests start get their own
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{db}"})


def migrated_prefect_home(home: Path) -> Path:
    """`home` as a PREFECT_HOME whose database already has its tables. A server on a new
    database first runs Prefect's migrations, about 17 s of CPU (28 s to start instead of
    11 on the slower 2-core machines); the tests of a command's own server start test the
    start, not the migrations, so they begin from a copy of the session server's tables."""
    import time

    template = Path(os.environ[PREFECT_DB_TEMPLATE_ENV])
    deadline = time.monotonic() + SERVER_STARTUP_TIMEOUT_S
    while not template.exists():  # written just after the session server first answered
        if time.monotonic() > deadline:
            raise RuntimeError(f"no migrated Prefect database at {template}")
        time.sleep(0.2)
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, home / "prefect.db")
    return home


def wait_for_prefect(url: str, server: subprocess.Popen | None = None) -> None:
    """Until the Prefect API at `url` answers its health check; at once if `server`, the
    process that should answer, has ended."""
    import time
    import urllib.request

    deadline = time.monotonic() + SERVER_STARTUP_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5):
                return
        except OSError:
            if server is not None and server.poll() is not None:
                raise pytest.UsageError(f"the tests' Prefect server for {url} exited with "
                                        f"code {server.returncode} before it answered") from None
            if time.monotonic() > deadline:
                raise pytest.UsageError(f"the tests' Prefect server at {url} never answered "
                                        f"({SERVER_STARTUP_TIMEOUT_S} s)") from None
            time.sleep(0.2)


def pytest_collection_finish(session):
    """Wait for the session's Prefect server (started in pytest_configure) to answer."""
    wait_for_prefect(os.environ["PREFECT_API_URL"])


def pytest_unconfigure(config):
    thread, started = getattr(config, "pucl_prefect", (None, {}))
    if thread is None:
        return
    thread.join()
    if "reaper" in started:
        started["reaper"].kill()
        started["reaper"].wait()
    if "server" in started:
        started["server"].terminate()
        try:
            started["server"].wait(10)
        except subprocess.TimeoutExpired:
            started["server"].kill()
            started["server"].wait()


@pytest.fixture(scope="module")
def harness():
    """The session's Prefect server (pytest_configure), named by the tests that need one."""
    from prefect.settings import PREFECT_API_URL

    assert PREFECT_API_URL.value(), "no Prefect server for the tests"
    yield


@pytest.fixture(scope="module")
def flows_env(tmp_path_factory, request):
    """A project copy and an MLflow store shared by the tests of one module, with the
    tiny params and the module's `PROJECT_PARAMS` over them."""
    from mlflow.tracking import MlflowClient

    base = tmp_path_factory.mktemp("flows")
    uri = new_store(base / "mlflow.db")
    with pytest.MonkeyPatch.context() as mp:
        root = make_project(base / "proj",
                            tiny_params(**getattr(request.module, "PROJECT_PARAMS", {})))
        mp.setenv("PUCL_ROOT", str(root))
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        mp.setenv("PATH", python_path())
        mp.setenv("PUCL_TRACKING", "on")  # restored afterwards whatever a test sets
        mp.chdir(root)
        yield {"root": root, "uri": uri, "client": MlflowClient(uri)}


@pytest.fixture(autouse=True)
def torch_tracing_flag_stays_down():
    """torch.export's process-wide "compiling" flag, left set by a test (two exports at
    once in one process: pucl.tracking.runs.EXPORT_LOCK), would change every later test
    on its worker: optimiser steps take their traced path and no work is counted. The
    test that leaves it set fails, not a test after it."""
    yield
    torch = sys.modules.get("torch")
    if torch is not None and torch.compiler.is_compiling():
        pytest.fail("torch.compiler.is_compiling() is still set after this test")
