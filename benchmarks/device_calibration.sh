#!/usr/bin/env bash
# verdict-calibration at the PAPER preset on the device machine (issue 18), in one command:
#
#   bash benchmarks/device_calibration.sh            # writes into $OUT (default /tmp/device_calibration)
#
# Runs from the repository root with PYTHONPATH=src (no install needed: jax, numpy, scipy,
# matplotlib, typer and rich are all it imports). JAX takes the GPU when its CUDA plugin is
# installed, else the CPU cores; the package itself keeps float64 (biasfree.core.precision).
# The truth runs go in one vmapped loop per net shape (depth, biases, width: 16 batches of 10
# nets at the paper preset), so the GPU runs each batch's 10 pairs of nets at once.
# Prints the device, the elapsed time, the checks and the confusion table; result.json,
# arrays.npz and the figure land in $OUT/verdict-calibration/. Extra arguments go to
# `biasfree run` (e.g. --set max_steps=10000); PRESET=tiny runs the tiny preset (a smoke test).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/device_calibration}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-/tmp/biasfree_jax_cache}"
PY="${PYTHON:-python3}"
"$PY" -c 'import jax; print("jax", jax.__version__, "backend", jax.default_backend(), jax.devices(), flush=True)'
start=$(date +%s.%N)
"$PY" -c 'import sys; from biasfree.app.cli import app; sys.argv[0] = "biasfree"; app()' \
    run verdict-calibration --preset "${PRESET:-paper}" --out "$OUT" "$@" || status=$?
end=$(date +%s.%N)
"$PY" -c "print(f'elapsed_s {$end - $start:.1f} (biasfree run verdict-calibration --preset ${PRESET:-paper})')"
"$PY" - "$OUT/verdict-calibration/result.json" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
m = r["metrics"]
print("checks:", {k: ("pass" if c["passed"] else "FAIL") + f" ({c['value']:g})" for k, c in r["checks"].items()})
print(f"points with a truth {m['points']:g}, decided {m['decided']:g}, undecided {m['undecided']:g}, "
      f"capped {m['capped_runs']:g}, agreement over decided {100 * m['agreement']:.1f}%")
print("   verdict \\ truth   linear      not")
for k in ("linear", "undecided", "not"):
    print(f"{k:>18} {m['confusion_' + k + '_linear']:>8g} {m['confusion_' + k + '_not']:>8g}")
print(r["notes"])
PYEOF
exit "${status:-0}"
