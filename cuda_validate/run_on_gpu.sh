#!/usr/bin/env bash
# The one prepared calibration run for a machine with a CUDA GPU (docs/calibration.md).
# From the repository root:
#
#   cuda_validate/run_on_gpu.sh              configure + build build-gpu/, measure, fit
#   cuda_validate/run_on_gpu.sh --prebuilt   use build-gpu/cuda_validate/ binaries as they are
#
# Writes into $OUT (default out/calibration): measurement.json (raw samples),
# calibration.json (fitted, for "calibration" in a hardware description),
# gpu_kernels.json (paged decode attention, INT8/INT4 scoring with top-k,
# copy/kernel interference), validate_copies/ and validate_kernels/ (held-out
# sizes: `kvtier validate --paths-only`), build.log, calibrate.log, fit.log,
# gpu_probe.log, validate.log, env.txt. One run does everything in under 8
# minutes: a build of four targets (-j as many CPUs as there are, about 3 minutes
# with 16) and probes capped at
# $KVTIER_PROBE_LIMIT_S (default 100) and $KVTIER_KERNEL_LIMIT_S (default 90)
# seconds.
#
# Exit: 0 measured and fitted, or no GPU here (a clear "skipped" line, before
#       anything is built);
#       1 anything that went wrong where a GPU is present.
# Environment: OUT, KVTIER_GPU_BUILD (build-gpu), KVTIER_HW (hardware description
# the fit is checked against; default configs/hardware/h200_cxl_nvme.json),
# KVTIER_GPU_NAME (gpu), KVTIER_LINK (pcie_gpu), KVTIER_PROBE_LIMIT_S (100),
# KVTIER_KERNEL_LIMIT_S (90).
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/out/calibration}
BUILD=${KVTIER_GPU_BUILD:-$ROOT/build-gpu}
HW=${KVTIER_HW:-configs/hardware/h200_cxl_nvme.json}
GPU_NAME=${KVTIER_GPU_NAME:-gpu}
LINK=${KVTIER_LINK:-pcie_gpu}
LIMIT=${KVTIER_PROBE_LIMIT_S:-100}
KLIMIT=${KVTIER_KERNEL_LIMIT_S:-90}
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
# No GPU device at all (no nvidia-smi listing one, no /dev/nvidia0): nothing
# to measure, so nothing is built (a build takes minutes on a small machine).
# --prebuilt goes on: its binaries say themselves that no device is usable.
gpu_device_present() {
  [ "$GPU_VISIBLE" = 1 ] && return 0
  compgen -G '/dev/nvidia[0-9]*' >/dev/null 2>&1
}
if [ "$PREBUILT" = 0 ] && ! gpu_device_present; then
  log "skipped: no GPU on this machine (nvidia-smi lists none, no /dev/nvidia0), nothing built or measured (this is the expected outcome without a GPU)"
  exit 0
fi
JOBS=$(nproc 2>/dev/null || echo 2)
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
GPUPROBE=$BUILD/cuda_validate/kvtier_gpu_probe
KVTIER=$BUILD/kvtier

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
    targets="kvtier_calibrate kvtier_fit_calibration kvtier_gpu_probe"
  fi
  # shellcheck disable=SC2086
  if ! timeout 240 cmake --build "$BUILD" --target $targets -j"$JOBS" >> "$OUT/build.log" 2>&1; then
    tail -15 "$OUT/build.log" | sed 's/^/run_on_gpu: build.log: /'
    fail_or_skip "build failed"
  fi
  log "built in $(elapsed)"
  # kvtier itself, for the held-out check; measuring does not depend on it.
  timeout 240 cmake --build "$BUILD" --target kvtier -j"$JOBS" >> "$OUT/build.log" 2>&1 \
    || log "kvtier did not build (held-out check skipped; see $OUT/build.log)"
  log "kvtier built in $(elapsed)"
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

# 4. Decode-side kernels: paged attention, scoring + top-k, copy/kernel interference.
grc=0
if [ -x "$GPUPROBE" ]; then
  log "measuring decode kernels (stop starting new sizes after ${KLIMIT} s; log: $OUT/gpu_probe.log)"
  timeout $((KLIMIT + 60)) "$GPUPROBE" --out "$OUT/gpu_kernels.json" --time-limit-s "$KLIMIT" > "$OUT/gpu_probe.log" 2>&1
  grc=$?
  sed 's/^/run_on_gpu: /' "$OUT/gpu_probe.log"
  [ "$grc" = 0 ] || log "kvtier_gpu_probe exited with $grc"
else
  log "kvtier_gpu_probe not built: decode kernels not measured"
fi

# 5. Held-out sizes on the GPU, as on the host: fit on alternate sizes, predict the others.
if [ -x "$KVTIER" ]; then
  for pair in "copies:$OUT/measurement.json" "kernels:$OUT/gpu_kernels.json"; do
    name=${pair%%:*}; file=${pair#*:}
    [ -s "$file" ] || continue
    "$KVTIER" validate --paths-only --measurement "$file" --out "$OUT/validate_$name" >> "$OUT/validate.log" 2>&1 \
      || log "kvtier validate --paths-only $file failed (see $OUT/validate.log)"
    grep -E '^\| |^Over all' "$OUT/validate_$name/report.md" 2>/dev/null | sed 's/^/run_on_gpu: /'
  done
fi

# 6. Summary: median time and rate per size.
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
  [ -s "$OUT/gpu_kernels.json" ] && python3 - "$OUT/gpu_kernels.json" <<'EOF' | sed 's/^/run_on_gpu: /'
import json, sys
m = json.load(open(sys.argv[1]))
for name, p in m["probes"].items():
    rows = []
    for s in p.get("samples", []):
        t = s["median_us"]
        extra = " | copy %.4g us" % s["median_b_us"] if "median_b_us" in s else ""
        rows.append("%s%s %.4g us %.4g GB/s%s" % (s.get("case", "") + " " if "case" in s else "", s["bytes"], t,
                                                 s["bytes"] / t * 1e-3, extra))
    print("%-26s %s%s" % (name, "; ".join(rows), " [error: %s]" % p["error"] if "error" in p else ""))
EOF
fi
log "done in $(elapsed); files in $OUT: $(cd "$OUT" && echo *)"
if [ "$rc" != 0 ] || [ "$frc" != 0 ] || { [ "$grc" != 0 ] && [ "$grc" != 77 ]; }; then
  log "FAILED: calibrate exit $rc, fit exit $frc, gpu probe exit $grc"
  exit 1
fi
log "OK: point a hardware description at the result with \"calibration\": \"<path to calibration.json>\""
exit 0
