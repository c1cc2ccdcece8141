#!/usr/bin/env bash
# The GPU rows of reports/benchmarks.md, in one go on a CUDA machine with pucl installed
# and Fashion-MNIST's IDX files under data/raw/fashion-mnist/ (or paths.data_root):
#   bash benchmarks/device_check.sh [OUT.csv]
# The CUDA checks of the tests first, then F-MNIST-I's recommended variant on seed 3, the
# default run and the head's placement (CPU against device). Each run appends its rows to
# OUT.csv and its warnings and errors to OUT.log.
# The whole script ends within DEADLINE seconds (default 540, inside a 10-minute call):
# each step gets at most its own limit and what is left.
set -u
out=${1:-reports/benchmarks/device_timing.csv}
deadline=${DEADLINE:-540}
export PUCL_TRACKING=off PYTHONUNBUFFERED=1

limit() {  # the smaller of $1 and the seconds left before the deadline (at least 1)
    local left=$((deadline - SECONDS))
    echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}

timeout "$(limit "${TEST_TIMEOUT:-150}")" python -m pytest -q -p no:cacheprovider \
    -o addopts="" tests/test_device_path.py || echo "failed: the CUDA tests (exit $?)"
for run in "--preset fmnist-i --seed 3" ""; do
    # shellcheck disable=SC2086  # the arguments are meant to split
    timeout "$(limit "${RUN_TIMEOUT:-150}")" python benchmarks/device_timing.py $run \
        --out "$out" 2>>"${out%.csv}.log" || echo "failed: $run (exit $?; see ${out%.csv}.log)"
    if [ -z "$run" ]; then
        timeout "$(limit 60)" python benchmarks/head_placement.py || echo "failed: head placement"
    fi
done
