#!/usr/bin/env bash
# The one prepared calibration run for a machine with a CUDA GPU (docs/calibration.md).
# From the repository root:
#
#   cuda_validate/run_on_gpu.sh              configure + build build-gpu/, measure, fit
#   cuda_validate/run_on_gpu.sh --prebuilt   use build-gpu/cuda_validate/ binaries as they are
#
# Writes into $OUT (default out/calibration): measurement.json (raw samples),
# calibration.json (fitted, for "calibration" in a hardware description),
# build.log, calibrate.log, fit.log, env.txt. Meant to finish in well under
# 5 minutes: a build of two targets (-j16) and probes capped at
# $KVTIER_PROBE_LIMIT_S seconds (default 150).
#
# Exit: 0 measured and fitted, or no GPU here (a clear "skipped" line);
#       1 anything that went wrong where a GPU is present.
# Environment: OUT, KVTIER_GPU_BUILD (build-gpu), KVTIER_HW (hardware description
# the fit is checked against; default configs/hardware/h200_cxl_nvme.json),
# KVTIER_GPU_NAME (gpu), KVTIER_LINK (pcie_gpu), KVTIER_PROBE_LIMIT_S (150).
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/out/calibration}
BUILD=${KVTIER_GPU_BUILD:-$ROOT/build-gpu}
HW=${KVTIER_HW:-configs/hardware/h200_cxl_nvme.json}
GPU_NAME=${KVTIER_GPU_NAME:-gpu}
LINK=${KVTIER_LINK:-pcie_gpu}
LIMIT=${KVTIER_PROBE_LIMIT_S:-150}
PREBUILT=0
[ "${1:-}" = "--prebuilt" ] && PREBUILT=1
mkdir -p "$OUT"
cd "$ROOT" || exit 1
T0=$(date +%s)

log() { echo "run_on_gpu: $*"; }
elapsed() { echo "$(( $(date +%s) - T0 )) s"; }

# Is a GPU visible to the driver? (Distinguishes "no GPU here" from "the harness failed on a GPU".)
GPU_VISIBLE=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then GPU_VISIBLE=1; fi
fail_or_skip() {  # message
  if [ "$GPU_VISIBLE" = 1 ]; then
    log "FAILED: $1 (a GPU is visible to nvidia-smi; see $OUT/*.log)"
    exit 1
  fi
  log "skipped: $1; no GPU on this machine, nothing measured (this is the expected outcome without a GPU)"
  exit 0
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname) ($(nproc) CPUs)"
  echo "git: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "nvcc: $(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || echo none)"
  (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | tail -1
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,pcie.link.gen.max,pcie.link.width.max \
      --format=csv 2>&1
  else
    echo "nvidia-smi: not available"
  fi
} > "$OUT/env.txt" 2>&1
sed 's/^/run_on_gpu: /' "$OUT/env.txt"

CAL=$BUILD/cuda_validate/kvtier_calibrate
FIT=$BUILD/cuda_validate/kvtier_fit_calibration

# 1. Build only the two tools.
if [ "$PREBUILT" = 0 ]; then
  command -v nvcc >/dev/null 2>&1 || { [ -x /usr/local/cuda/bin/nvcc ] && export PATH="$PATH:/usr/local/cuda/bin"; }
  # A build folder configured elsewhere (another checkout path) cannot be reused.
  if [ -f "$BUILD/CMakeCache.txt" ] && ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT" "$BUILD/CMakeCache.txt"; then
    log "removing $BUILD: configured for another source folder"
    rm -rf "$BUILD"
  fi
  log "configuring and building $BUILD (log: $OUT/build.log)"
  if ! timeout 200 cmake -S "$ROOT" -B "$BUILD" -DKVTIER_TESTS=OFF -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1; then
    tail -15 "$OUT/build.log" | sed 's/^/run_on_gpu: build.log: /'
    fail_or_skip "cmake configure failed"
  fi
  targets="kvtier_fit_calibration"
  if grep -q "cuda_validate: nvcc not found" "$OUT/build.log"; then
    log "nvcc not found: building the fit tool only"
  else
    targets="kvtier_calibrate kvtier_fit_calibration"
  fi
  # shellcheck disable=SC2086
  if ! timeout 240 cmake --build "$BUILD" --target $targets -j16 >> "$OUT/build.log" 2>&1; then
    tail -15 "$OUT/build.log" | sed 's/^/run_on_gpu: build.log: /'
    fail_or_skip "build failed"
  fi
  log "built in $(elapsed)"
fi
[ -x "$CAL" ] || fail_or_skip "kvtier_calibrate is not built (nvcc not found when configuring $BUILD)"

# 2. Measure.
log "measuring (probes stop starting new sizes after ${LIMIT} s; log: $OUT/calibrate.log)"
timeout $((LIMIT + 90)) "$CAL" --out "$OUT/measurement.json" --time-limit-s "$LIMIT" > "$OUT/calibrate.log" 2>&1
rc=$?
sed 's/^/run_on_gpu: /' "$OUT/calibrate.log"
case $rc in
  0) ;;
  77) fail_or_skip "kvtier_calibrate found no usable CUDA device" ;;
  124) log "FAILED: kvtier_calibrate ran past $((LIMIT + 90)) s and was stopped"; exit 1 ;;
  *) log "kvtier_calibrate exited with $rc" ;;
esac
[ -s "$OUT/measurement.json" ] || { log "FAILED: no measurement written"; exit 1; }

# 3. Fit, checked against the hardware description.
log "fitting (--gpu $GPU_NAME --link $LINK --hardware $HW)"
"$FIT" "$OUT/measurement.json" --out "$OUT/calibration.json" --gpu "$GPU_NAME" --link "$LINK" --hardware "$HW" \
  > "$OUT/fit.log" 2>&1
frc=$?
sed 's/^/run_on_gpu: /' "$OUT/fit.log"

# 4. Summary: median time and rate per size.
if command -v python3 >/dev/null 2>&1; then
  python3 - "$OUT/measurement.json" <<'EOF' | sed 's/^/run_on_gpu: /'
import json, sys
m = json.load(open(sys.argv[1]))
d = m["device"]
print("%s, cc %s, driver %s, runtime %s, %.0f s of probes" % (d["name"], d.get("compute_capability"),
      d.get("driver_version"), d.get("runtime_version"), m.get("elapsed_s", 0)))
for name, p in m["probes"].items():
    rows = []
    for s in p.get("samples", []):
        t = s["median_us"]
        if "n" in s:
            rows.append("n=%d %.1f TFLOP/s" % (s["n"], s["flops"] / t * 1e-6))
        else:
            rows.append("%s %.3g us %.3g GB/s" % (s["bytes"], t, s["bytes"] / t * 1e-3))
    print("%-14s %s%s" % (name, "; ".join(rows), " [error: %s]" % p["error"] if "error" in p else ""))
EOF
fi
log "done in $(elapsed); files in $OUT: $(cd "$OUT" && echo *)"
if [ "$rc" != 0 ] || [ "$frc" != 0 ]; then
  log "FAILED: calibrate exit $rc, fit exit $frc"
  exit 1
fi
log "OK: point a hardware description at the result with \"calibration\": \"<path to calibration.json>\""
exit 0
