#!/usr/bin/env bash
# One production cycle (docs/production.md) on the shipped params, in a fresh clone of this
# repository, with wall time per step: the rows of reports/production/cycle.csv.
#   bash benchmarks/production_cycle.sh [WORKDIR]      (default /tmp/pucl-production-cycle)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-/tmp/pucl-production-cycle}"
rm -rf "$work" && git clone -q "$repo" "$work" && cd "$work"
export PUCL_ROOT="$work" OMP_WAIT_POLICY=PASSIVE
pucl="$repo/.venv/bin/pucl"
tracked=(--set data.dataset=tracked --set data.task=given)
step() { local name="$1"; shift; local t0=$SECONDS
         echo "== $name"; "$@" 2>&1 | grep -vE "INFO|WARNING|^\s*$" || true
         echo "   ($((SECONDS - t0)) s)"; }
step "init"       "$pucl" data init --rows 2000 --rest arriving.npz
step "retrain 1"  "$pucl" retrain --no-progress "${tracked[@]}"
step "retrain 2"  "$pucl" retrain --no-progress "${tracked[@]}"
step "add batch"  "$pucl" data add arriving.npz
"$repo/.venv/bin/dvc" status build_split | sed -n 1,3p   # sed reads it all: no SIGPIPE
step "retrain 3"  "$pucl" retrain --no-progress "${tracked[@]}"
"$repo/.venv/bin/python" -c "import numpy as np; np.savez('new.npz', x=np.load('arriving.npz')['x'][:1000])"
step "predict"    "$pucl" predict new.npz --out scores.csv --no-progress
