#!/usr/bin/env bash
# Builds the libFuzzer targets (in build-fuzz) and runs each for SECONDS,
# starting from the committed corpus tests/fuzz/corpus/<target>. Fails (exit 1)
# on any finding: a crash, an exception other than the parser's ConfigError,
# a sanitizer report, a leak, an input taking more than 10 s, or more than
# 2 GB of memory. Findings are kept under $KVTIER_FUZZ_OUT (default
# build-fuzz/findings/<target>/); docs/reliability.md says how to reproduce one.
#   tests/fuzz/run.sh SECONDS [TARGET...]     e.g. tests/fuzz/run.sh 60, tests/fuzz/run.sh 600 azure_fuzz
# KVTIER_FUZZ_JOBS: targets at once (default: the number of CPUs).
# KVTIER_FUZZ_BUILD: an existing tree configured with KVTIER_FUZZ=ON to build the
# targets in instead of build-fuzz (CI reuses the asan preset's build-asan).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: tests/fuzz/run.sh SECONDS [TARGET...]" >&2
  exit 2
fi
secs=$1
shift
build=${KVTIER_FUZZ_BUILD:-build-fuzz}
out=${KVTIER_FUZZ_OUT:-$build/findings}
jobs=${KVTIER_FUZZ_JOBS:-$(nproc)}

if [ -z "${KVTIER_FUZZ_BUILD:-}" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DKVTIER_FUZZ=ON -DKVTIER_TESTS=OFF -DKVTIER_CUDA=OFF \
    "${launcher[@]}" >/dev/null
elif ! grep -q '^KVTIER_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "run.sh: $build is not a tree configured with KVTIER_FUZZ=ON (e.g. cmake --preset asan)" >&2
  exit 2
fi
cmake --build "$build" -j"$(nproc)" --target kvtier_fuzz

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/*_fuzz.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi

run_one() {
  local t=$1 dir=$out/$1
  rm -rf "$dir"
  mkdir -p "$dir/new"
  # A fixed seed (KVTIER_FUZZ_SEED, default 1): the same mutations run on every
  # machine, so a CI run fails on what the code does, not on the draw.
  local args=(-max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
              -seed="${KVTIER_FUZZ_SEED:-1}" -artifact_prefix="$dir/")
  [ -f "tests/fuzz/$t.dict" ] && args+=(-dict="tests/fuzz/$t.dict")
  # New inputs go to the first folder; the committed corpus is only read.
  local rc=0
  TMPDIR="$dir" "$build/tests/fuzz/$t" "${args[@]}" "$dir/new" "tests/fuzz/corpus/$t" >"$dir/log" 2>&1 || rc=$?
  local execs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  local found
  found=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \
          -o -name 'slow-unit-*' \) -printf '%f ' | sed 's/ $//')
  if [ $rc -ne 0 ] || [ -n "$found" ]; then
    echo "FAIL $t: exit $rc after ${execs:-?} runs ${found:+($found)}; log: $dir/log"
    grep -m1 -E 'ERROR: |runtime error:|kvtier fuzz finding|terminate called' "$dir/log" || true
    return 1
  fi
  echo "ok   $t: ${execs:-?} runs in ${secs} s"
}

fail=0
pids=()
names=()
for t in "${targets[@]}"; do
  if [ ! -x "$build/tests/fuzz/$t" ]; then
    echo "FAIL $t: no such fuzz target (tests/fuzz/$t.cpp)"
    fail=1
    continue
  fi
  run_one "$t" &
  pids+=($!)
  names+=("$t")
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || fail=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || fail=1; done
exit $fail
