"""The production cycle over many schedules and under kills (reports/reliability).

    python benchmarks/reliability.py soak  [--cycles 60] [--add-every 5] [--work DIR]
    python benchmarks/reliability.py kills [--trials 30] [--seed 0] [--work DIR]

Both build a fresh project: a clone of this repository's HEAD with small params on the
tracked dataset (`pucl data init`: 1,500 rows of the embedded digits; the other 2,500
arrive later, in batches).

soak: `pucl serve --cron '* * * * *'` retrains every minute. After every --add-every
cycles a batch is added (`pucl data add`), and after every cycle `pucl predict` scores
500 rows with the champion. One row per cycle: the pass's decision and seconds, and the
serve process tree's processes, open files and memory, the MLflow store's, the DVC
cache's and the run directories' size.

kills: seeded trials, each starting `pucl retrain` (with a new seed, so it trains),
`pucl data add` or `pucl repro --force` and killing its whole process group with SIGKILL
at a random moment of its usual duration. Then: the locks are free, every output file
reads whole, and the next command (a retrain pass) succeeds. After it: no MLflow run is
left RUNNING, every registered version has its decision (a holdout score, or the orphan
tag of a killed pass), the champion has a score, DVC's record of the dataset matches its
files, and every batch whose add succeeded is there once. One row per trial.

The whole script runs the real commands as a user would, each in its own process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]

OUT = ROOT / "reports" / "reliability"
# Small, real settings: a retrain pass trains and scores in well under a minute on 2 cores.
SMALL = {
    "base": {"threads": 1},
    "data": {"dataset": "tracked", "task": "given"},
    "split": {"val_fraction": 0.0},
    "prior": {"km": {"max_per_side": 300}, "heldout": {"classifier": "logistic",
                                                       "cvir_rounds": 1}},
    "pretrain": {"epochs": 2, "batch_size": 256},
    "pupl": {"kmeans": {"restarts": 3}},
    "classifier": {"epochs": 3},
    "evaluate": {"embedding": "pca", "embedding_points": 200, "tta_shift": 0},
}
INIT_ROWS, BATCHES = 1500, 12
MODEL = "pucl-classifier"


def deep_update(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = deep_update(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


class Project:
    """A fresh clone with small params and a tracked dataset; runs `pucl` commands in it."""

    def __init__(self, work: Path, env: dict[str, str] | None = None):
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run(["git", "clone", "-q", str(ROOT), str(work)], check=True)
        self.root = work
        self.commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=work,
                                     capture_output=True, text=True).stdout.strip()
        params = yaml.safe_load((work / "params.yaml").read_text())
        (work / "params.yaml").write_text(yaml.safe_dump(deep_update(params, SMALL),
                                                         sort_keys=False))
        # the clone's code, not the editable install's working tree (which may move on)
        self.env = {**os.environ, "PUCL_ROOT": str(work), "OMP_WAIT_POLICY": "PASSIVE",
                    "PATH": f"{ROOT / '.venv/bin'}{os.pathsep}{os.environ['PATH']}",
                    "PYTHONPATH": str(work / "src"), **(env or {})}
        self.env.pop("MLFLOW_TRACKING_URI", None)
        self.pucl("data", "init", "--rows", str(INIT_ROWS), "--rest", "arriving.npz")
        arriving = np.load(work / "arriving.npz")
        self.batches = []
        for k, rows in enumerate(np.array_split(np.arange(len(arriving["pu"])), BATCHES)):
            path = work / f"batch_{k:02d}.npz"
            np.savez(path, **{name: arriving[name][rows] for name in arriving.files})
            self.batches.append(path)
        np.savez(work / "new.npz", x=arriving["x"][:500])

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "pucl.cli", *args]

    def pucl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(self.command(*args), cwd=self.root, env=self.env,
                              capture_output=True, text=True)
        if check and done.returncode != 0:
            raise RuntimeError(f"pucl {' '.join(args)} failed ({done.returncode}): "
                               f"{done.stderr.strip().splitlines()[-1:]}")
        return done

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(*args), cwd=self.root, env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)

    def client(self):
        from mlflow.tracking import MlflowClient

        return MlflowClient(f"sqlite:///{self.root / 'mlflow.db'}")

    def size_mb(self, *paths: str) -> float:
        total = 0
        for rel in paths:
            path = self.root / rel
            files = [path] if path.is_file() else path.rglob("*") if path.exists() else []
            total += sum(f.stat().st_size for f in files if f.is_file())
        return total / 2**20


# -- soak ------------------------------------------------------------------------------


def tree_usage(proc: psutil.Process) -> tuple[int, int, float]:
    """Processes, open files and resident memory (MB) of a process and its descendants."""
    procs, fds, rss = 0, 0, 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            fds += p.num_fds()
            rss += p.memory_info().rss
            procs += 1
        except psutil.Error:  # ended while being counted
            pass
    return procs, fds, rss / 2**20


def retrain_runs(client) -> list:
    exp = client.get_experiment_by_name("pucl")
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], "tags.kind = 'retrain'",
                              order_by=["attributes.start_time ASC"])


def soak(args: argparse.Namespace) -> None:
    from tqdm.auto import tqdm

    project = Project(Path(args.work))
    serve = project.start("serve", "--cron", "* * * * *", "--wait", "50")
    tree = psutil.Process(serve.pid)
    rows, seen, added = [], 0, 0
    bar = tqdm(total=args.cycles, unit="cycle", desc="soak")
    deadline = time.time() + 120 * args.cycles + 300
    try:
        while len(rows) < args.cycles:
            if serve.poll() is not None:
                raise RuntimeError(f"pucl serve ended ({serve.returncode})")
            if time.time() > deadline:
                raise RuntimeError("no retrain pass for too long")
            finished = [r for r in retrain_runs(project.client())
                        if r.info.status != "RUNNING"]
            if len(finished) <= seen:
                time.sleep(5)
                continue
            for run in finished[seen:]:
                rows.append(soak_row(project, run, tree, len(rows) + 1))
                bar.update(1)
            seen = len(finished)
            if len(rows) % args.add_every == 0 and added < len(project.batches):
                t0 = time.perf_counter()
                done = project.pucl("data", "add", project.batches[added].name, check=False)
                rows[-1].update(added_batch=added, add_rc=done.returncode,
                                add_s=round(time.perf_counter() - t0, 1))
                added += 1
            t0 = time.perf_counter()
            done = project.pucl("predict", "new.npz", "--out", "scores.csv", "--no-progress",
                                check=False)
            rows[-1].update(predict_rc=done.returncode,
                            predict_s=round(time.perf_counter() - t0, 1))
            pd.DataFrame(rows).assign(commit=project.commit).to_csv(args.out / "soak.csv",
                                                                 index=False)
    finally:
        bar.close()
        try:
            started = [tree, *tree.children(recursive=True)]  # serve, its server, a pass
        except psutil.Error:  # serve ended on its own
            started = []
        os.killpg(serve.pid, signal.SIGINT)  # Ctrl-C, as a user stops it
        try:
            serve.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
    _, left = psutil.wait_procs(started, timeout=30)
    print(f"soak: {len(rows)} cycles; processes left after Ctrl-C: {len(left)}")
    frame = pd.DataFrame(rows).assign(commit=project.commit)
    frame.to_csv(args.out / "soak.csv", index=False)
    soak_figure(frame, args.out / "soak.png")


def soak_row(project: Project, run, tree: psutil.Process, cycle: int) -> dict:
    procs, fds, rss = tree_usage(tree)
    tags = run.data.tags
    return {"cycle": cycle, "decision": tags.get("retrain.decision", "none"),
            "status": run.info.status,
            "seconds": round((run.info.end_time - run.info.start_time) / 1000, 1),
            "batches": len(list((project.root / "data/dataset/batches").glob("*.npz"))),
            "processes": procs, "open_files": fds, "rss_mb": round(rss, 1),
            "store_mb": round(project.size_mb("mlflow.db", "mlruns"), 2),
            "dvc_cache_mb": round(project.size_mb(".dvc/cache"), 2),
            "runs_mb": round(project.size_mb("data/runs"), 2),
            "dataset_mb": round(project.size_mb("data/dataset"), 2)}


def soak_figure(frame: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("processes", "processes"), ("open_files", "open files"),
              ("rss_mb", "memory (MB, RSS)"),
              (["store_mb", "dvc_cache_mb", "runs_mb", "dataset_mb"], "disk (MB)")]
    fig, axes = plt.subplots(1, len(panels), figsize=(16, 3.4))
    for ax, (columns, title) in zip(axes, panels, strict=True):
        for column in [columns] if isinstance(columns, str) else columns:
            ax.plot(frame["cycle"], frame[column], label=column)
        ax.set_title(title)
        ax.set_xlabel("cycle (one a minute)")
        if not isinstance(columns, str):
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# -- kills -----------------------------------------------------------------------------


def prefect_server(root: Path) -> tuple[subprocess.Popen, str]:
    """One Prefect server for every command of the trials (each would start its own)."""
    import urllib.request

    port = 4200 + os.getpid() % 500
    env = {**os.environ, "PREFECT_HOME": str(root / ".prefect"),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host",
                               "127.0.0.1", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2)
            return server, url
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("the Prefect server did not start")


def readable(path: Path) -> bool:
    """The file reads whole, as pucl reads it."""
    try:
        if path.suffix == ".pt":
            from pucl.io import read_torch

            read_torch(path, "file", "")
        elif path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                [archive[name] for name in archive.files]
        elif path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix in (".parquet", ".csv"):
            (pd.read_parquet if path.suffix == ".parquet" else pd.read_csv)(path)
        return True
    except Exception:
        return False


def locks_free(root: Path) -> bool:
    from filelock import FileLock, Timeout

    try:
        for lock in (root / "data/runs/retrain.lock", root / "data/dataset.lock"):
            with FileLock(lock, timeout=0):
                pass
        return True
    except Timeout:
        return False


def check_after_kill(project: Project) -> dict:
    files = [p for p in (project.root / "data").rglob("*") if p.is_file()
             and not p.name.startswith(".") and p.suffix in (".pt", ".npz", ".json",
                                                              ".parquet", ".csv")]
    temps = [p for p in (project.root / "data").rglob(".*.tmp")]
    return {"locks_free": locks_free(project.root),
            "unreadable_files": sum(not readable(p) for p in files),
            "temp_files_left": len(temps)}


def check_after_recovery(project: Project, added: list[Path]) -> dict:
    from pucl.production.datastore import _recorded_files

    client = project.client()
    exp = client.get_experiment_by_name("pucl")
    running = client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'")
    versions = client.search_model_versions(f"name = '{MODEL}'")
    undecided = [v.version for v in versions
                 if "holdout_score" not in v.tags and v.tags.get("retrain.orphan") != "true"]
    try:
        champion = client.get_model_version_by_alias(MODEL, "champion")
        champion_ok = "holdout_score" in champion.tags
    except Exception:
        champion_ok = False
    dataset = project.root / "data/dataset"
    files = sorted(p.name for p in (dataset / "batches").glob("*.npz"))
    recorded = _recorded_files(project.root, dataset / "batches.dvc") or set()
    contents = [np.load(dataset / "batches" / name)["pu"].tobytes() for name in files[1:]]
    wanted = [np.load(path)["pu"].tobytes() for path in added]
    return {"running_runs": len(running), "undecided_versions": len(undecided),
            "champion_ok": champion_ok, "unrecorded_batches": len(set(files) - recorded),
            "lost_batches": sum(contents.count(w) != 1 for w in wanted),
            "batches": len(files)}


def last_line(done: subprocess.CompletedProcess) -> str:
    """What a failed command said ('' when it succeeded): DVC's error line if there is
    one (pucl's own last line then only says that dvc failed), else its last line."""
    lines = done.stderr.strip().splitlines()
    if not done.returncode or not lines:
        return ""
    errors = [line for line in lines if line.startswith("ERROR")]
    return " / ".join([*errors[-1:], lines[-1]])[:400]


def kills(args: argparse.Namespace) -> None:
    from tqdm.auto import tqdm

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server, url = prefect_server(work)
    rows = []
    try:
        project = Project(work / "proj", {"PREFECT_API_URL": url})
        project.pucl("retrain", "--no-progress")  # a champion to keep through the kills
        rng = random.Random(args.seed)
        added: list[Path] = []
        next_batch = 0
        commands: dict[str, Callable[[int], list[str]]] = {
            "retrain": lambda t: ["retrain", "--no-progress", "--set", f"base.seed={100 + t}"],
            "data add": lambda t: ["data", "add", project.batches[next_batch].name],
            "repro": lambda t: ["repro", "--force"],
        }
        usual = {}
        for name, make in commands.items():  # each command's usual duration, unkilled
            t0 = time.perf_counter()
            project.pucl(*make(-1))
            usual[name] = time.perf_counter() - t0
            if name == "data add":
                added.append(project.batches[next_batch])
                next_batch += 1
        project.pucl("retrain", "--no-progress")
        for trial in tqdm(range(args.trials), unit="trial", desc="kills"):
            name = rng.choice(sorted(commands))
            if name == "data add" and next_batch >= len(project.batches):
                name = "retrain"
            delay = rng.uniform(0.05, 1.0) * usual[name]
            proc = project.start(*commands[name](trial))
            time.sleep(delay)
            killed = proc.poll() is None
            with contextlib.suppress(ProcessLookupError):  # it may end just now
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            if name == "data add":  # whether it was recorded: the checks below say
                if not killed and proc.returncode == 0:
                    added.append(project.batches[next_batch])
                next_batch += 1
            row = {"trial": trial, "command": name, "delay_s": round(delay, 2),
                   "usual_s": round(usual[name], 1), "killed_running": killed,
                   **check_after_kill(project)}
            recovery = project.pucl("retrain", "--no-progress", check=False)
            row["recovery_rc"] = recovery.returncode
            row["error"] = last_line(recovery)
            row.update(check_after_recovery(project, added))
            if name == "repro":
                again = project.pucl("repro", check=False)
                row["repro_after_rc"] = again.returncode
                row["error"] = row["error"] or last_line(again)
            row["ok"] = (row["locks_free"] and row["unreadable_files"] == 0
                         and row["recovery_rc"] == 0 and row["running_runs"] == 0
                         and row["undecided_versions"] == 0 and row["champion_ok"]
                         and row["unrecorded_batches"] == 0 and row["lost_batches"] == 0
                         and row.get("repro_after_rc", 0) == 0)
            rows.append(row)
            pd.DataFrame(rows).assign(commit=project.commit, seed=args.seed).to_csv(
                args.out / "kills.csv", index=False)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    frame = pd.DataFrame(rows)
    kills_figure(frame, args.out / "kills.png")
    print(f"kills: {int(frame['ok'].sum())} of {len(frame)} trials with nothing lost "
          f"({int(frame['killed_running'].sum())} killed while running)")


def kills_figure(frame: pd.DataFrame, path: Path) -> None:
    """Per command: trials killed while running and after it ended, and those survived."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = frame.groupby("command")
    fig, ax = plt.subplots(figsize=(6, 3.2))
    names = sorted(by.groups)
    x = np.arange(len(names))
    ax.bar(x - 0.2, [by.get_group(n)["killed_running"].sum() for n in names], 0.4,
           label="killed while running")
    ax.bar(x + 0.2, [by.get_group(n)["ok"].sum() for n in names], 0.4,
           label="nothing lost after it")
    ax.plot(x, [len(by.get_group(n)) for n in names], "k_", markersize=40, label="trials")
    ax.set_xticks(x, names)
    ax.set_ylabel("trials")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("soak", help="pucl serve every minute for --cycles cycles")
    one.add_argument("--cycles", type=int, default=60)
    one.add_argument("--add-every", type=int, default=5)
    one.add_argument("--work", default="/tmp/pucl-soak")
    one.add_argument("--out", type=Path, default=OUT, help="where soak.csv and soak.png go")
    two = sub.add_parser("kills", help="--trials commands killed at random moments")
    two.add_argument("--trials", type=int, default=30)
    two.add_argument("--seed", type=int, default=0)
    two.add_argument("--work", default="/tmp/pucl-kills")
    two.add_argument("--out", type=Path, default=OUT, help="where kills.csv goes")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    soak(args) if args.what == "soak" else kills(args)


if __name__ == "__main__":
    main()
