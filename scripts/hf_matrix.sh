#!/usr/bin/env bash
# The transformers release matrix: one small venv per release, the HF tests (and optionally a fuzz
# campaign over every HF target) run in each, and a table of the outcomes.
#
# Each release venv (.venv-hf-<release>/) holds only transformers and the dependencies its own pins
# need; a .pth file appends the dev venv's site-packages (torch, numpy, hypothesis, pytest, ...) and
# the repository root to sys.path, *after* the venv's own site-packages, so a release's pins
# (huggingface_hub, tokenizers, safetensors, ...) win over the dev venv's copies. The build verifies
# that: every requirement transformers declares is satisfied by the copy Python actually imports.
# Built once; rebuilt when the build recipe (the build function below) or the dev venv changes (stamp).
#
# Usage: scripts/hf_matrix.sh [options] [-- extra pytest args]
#   --releases "4.45.2 newest"   releases to run (default: $DEFAULT_RELEASES below); `newest` is the newest
#                                release on the index (pip index versions), so a scheduled run tracks releases
#   --fuzz SECONDS               also run one `kvwindow fuzz --seed 0 --report` campaign per release over every
#                                HF target it lists as available (hf-dynamic, hf-static, hf-mistral, hf-gemma2,
#                                each hf:<model_type>), SECONDS per target; scripts/compat_table.py then
#                                writes OUT/compat.md (release x target) from the reports
#   --write-docs                 with --fuzz: also write docs/compat.md, the README's supported-range claim
#                                and the findings' release tables (scripts/compat_table.py --write)
#   --no-tests                   skip the pytest run (build + fuzz only)
#   --build-only                 build the venvs and stop
#   --out DIR                    where logs, reports and tables go (default: .stamp-hf-matrix/)
# Needs the dev venv (`make setup`). Runs releases one at a time. Exit 0 when every selected release
# built and its tests passed, 1 otherwise (fuzz outcomes are reported in the tables, not in the exit code).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1

# The oldest supported release, one per minor where an API the adapters touch changed (see
# impl/hf/compat.py), releases that carry a finding, and the newest the registry served when written.
DEFAULT_RELEASES="4.45.2 4.46.3 4.47.1 4.48.3 4.49.0 4.50.3 4.51.3 4.52.4 4.53.3 4.54.1 4.55.4 4.56.2 4.57.6 5.0.0 5.10.4 5.20.2 5.24.0 5.25.0"
RELEASES="$DEFAULT_RELEASES"
FUZZ=0
WRITE_DOCS=0
TESTS=1
BUILD_ONLY=0
OUT=".stamp-hf-matrix"
DEV_VENV="${DEV_VENV:-.venv}"
while [ $# -gt 0 ]; do
  case "$1" in
    --releases) RELEASES="$2"; shift 2 ;;
    --fuzz) FUZZ="$2"; shift 2 ;;
    --write-docs) WRITE_DOCS=1; shift ;;
    --no-tests) TESTS=0; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    --out) OUT="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "hf_matrix: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
PYTEST_EXTRA=("$@")

if [ ! -x "$DEV_VENV/bin/python" ]; then
  echo "hf_matrix: no dev venv at $DEV_VENV; run 'make setup' first" >&2
  exit 2
fi
MATRIX_NAME=hf_matrix
# shellcheck source=scripts/matrix_newest.sh
source "$(dirname "$0")/matrix_newest.sh"
resolve_newest "transformers"
SHARED="$("$DEV_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
PYVER="$("$DEV_VENV/bin/python" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')"
mkdir -p "$OUT"

build() {  # build .venv-hf-$1 unless its stamp is current
  local rel="$1" venv=".venv-hf-$1"
  local stamp="$venv/.kvwindow-hf-matrix"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$KEY" ]; then return 0; fi
  rm -rf "$venv"
  "$DEV_VENV/bin/python" -m venv --without-pip "$venv"
  local site="$venv/lib/$PYVER/site-packages"
  # Appended after the venv's own site-packages: the release's pins come first.
  printf '%s\n%s\n' "$SHARED" "$PWD" > "$site/zz_kvwindow_shared.pth"
  "$DEV_VENV/bin/python" -m pip --python "$venv/bin/python" install -q "transformers==$rel"
  "$venv/bin/python" - "$rel" <<'EOF'
# Every requirement transformers declares must be met by the distribution Python finds first
# (the venv's own copy where pip installed one, else the shared one), and the module imported
# must be that distribution's.
import importlib, importlib.metadata as md, sys
from packaging.requirements import Requirement
rel = sys.argv[1]
assert md.version("transformers") == rel, f"transformers {md.version('transformers')} found, wanted {rel}"
bad = []
for line in md.requires("transformers") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    try:
        have = md.version(req.name)
    except md.PackageNotFoundError:
        bad.append(f"{req.name}: missing"); continue
    if not req.specifier.contains(have, prereleases=True):
        bad.append(f"{req.name} {have} does not satisfy {req}")
for mod, dist in (("huggingface_hub", "huggingface_hub"), ("tokenizers", "tokenizers"), ("safetensors", "safetensors")):
    m = importlib.import_module(mod)
    if getattr(m, "__version__", md.version(dist)) != md.version(dist):
        bad.append(f"{mod} imported {m.__version__} from {m.__file__}, metadata says {md.version(dist)}")
if bad:
    sys.exit(f"transformers {rel}: shared packages shadow its pins: " + "; ".join(bad))
import torch, transformers
print(f"  transformers {transformers.__version__} + torch {torch.__version__}: pins verified")
EOF
  echo "$KEY" > "$stamp"
}
KEY="$(declare -f build | sha256sum | cut -c1-16) $SHARED"

declare -A TEST_RESULT FUZZ_RESULT
start_all=$(date +%s)
status=0
for rel in $RELEASES; do
  t0=$(date +%s)
  echo "== transformers $rel"
  if ! build "$rel" > "$OUT/build-$rel.log" 2>&1; then
    echo "  build failed: $OUT/build-$rel.log"; tail -3 "$OUT/build-$rel.log"
    TEST_RESULT[$rel]="build failed"; status=1; continue
  fi
  cat "$OUT/build-$rel.log"
  [ "$BUILD_ONLY" = 1 ] && continue
  py=".venv-hf-$rel/bin/python"
  if [ "$TESTS" = 1 ]; then
    set +e
    "$py" -m pytest -q -p no:cacheprovider tests/test_hf_*.py "${PYTEST_EXTRA[@]}" > "$OUT/pytest-$rel.log" 2>&1
    rc=$?
    set -e
    # (-qq prints no summary line: then the exit status is the summary)
    summary="$(grep -E '[0-9]+ (passed|failed|error)' "$OUT/pytest-$rel.log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//' || true)"
    if [ $rc -gt 1 ] && [ $rc -ne 5 ]; then
      summary="pytest died (exit $rc; $OUT/pytest-$rel.log)"
    elif [ -z "$summary" ]; then
      summary="exit $rc ($OUT/pytest-$rel.log)"
    fi
    TEST_RESULT[$rel]="$summary"
    if [ $rc -ne 0 ]; then
      status=1
      tail -n 60 "$OUT/pytest-$rel.log" | sed 's/^/  | /'  # a CI log shows what failed, not only where the log is
    fi
    echo "  tests: ${TEST_RESULT[$rel]}"
  fi
  if [ "$FUZZ" != 0 ]; then
    # Every HF target the release lists as available, in one campaign (unavailable ones, with the reason,
    # stay in targets-$rel.txt for compat_table.py); SECONDS each.
    "$py" -m fuzz.cli fuzz --list-targets > "$OUT/targets-$rel.txt" 2> "$OUT/targets-$rel.err" || true
    targets=()
    while read -r name _ avail _; do  # not $status: that is the script's exit status
      case "$name" in hf-*|hf:*) [ "$avail" = available ] && targets+=(--target "$name") ;; esac
    done < "$OUT/targets-$rel.txt"
    n=$(( ${#targets[@]} / 2 ))
    rm -rf "$OUT/report-$rel.json" "$OUT/seeds-$rel"
    set +e
    "$py" -m fuzz.cli fuzz "${targets[@]}" --time $(( FUZZ * n )) --seed 0 --plain --report "$OUT/report-$rel.json" \
      --seeds-dir "$OUT/seeds-$rel" --db "$OUT/db-$rel" > "$OUT/fuzz-$rel.log" 2>&1
    rc=$?
    set -e
    case $rc in 0) r=clean ;; 1) r="findings (known or new)" ;; 2) r=usage ;; 3) r="harness fault" ;; *) r="rc=$rc" ;; esac
    FUZZ_RESULT[$rel]="$n targets: $r"
    echo "  fuzz ($n HF targets, ${FUZZ} s each): $r"
    grep -E "^(known finding|finding|FAILED|--skip-known)" "$OUT/fuzz-$rel.log" | sed 's/^/  | /' || true
  fi
  echo "  ($(( $(date +%s) - t0 )) s)"
done

[ "$BUILD_ONLY" = 1 ] && { echo "built in $(( $(date +%s) - start_all )) s"; exit 0; }
{
  printf '| transformers |'
  [ "$TESTS" = 1 ] && printf ' tests |'
  [ "$FUZZ" != 0 ] && printf ' fuzz |'
  printf '\n|---|'
  [ "$TESTS" = 1 ] && printf -- '---|'
  [ "$FUZZ" != 0 ] && printf -- '---|'
  printf '\n'
  for rel in $RELEASES; do
    printf '| %s |' "$rel"
    [ "$TESTS" = 1 ] && printf ' %s |' "${TEST_RESULT[$rel]:-}"
    [ "$FUZZ" != 0 ] && printf ' %s |' "${FUZZ_RESULT[$rel]:-}"
    printf '\n'
  done
} | tee "$OUT/table.md"
if [ "$FUZZ" != 0 ]; then
  # The release x target table from this run's reports (only the releases run here).
  write=()
  [ "$WRITE_DOCS" = 1 ] && write=(--write)
  "$DEV_VENV/bin/python" scripts/compat_table.py --reports "$OUT" --seconds "$FUZZ" "${write[@]}" > "$OUT/compat.log" \
    || { status=1; cat "$OUT/compat.log"; }
  echo "hf_matrix: release x target table in $OUT/compat.md$([ "$WRITE_DOCS" = 1 ] && echo ' and docs/compat.md')"
fi
echo "hf_matrix: $(( $(date +%s) - start_all )) s for $(echo $RELEASES | wc -w) releases; logs in $OUT/"
exit $status
