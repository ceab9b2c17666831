#!/usr/bin/env bash
# The release matrix of one inference engine (DESIGN §6): one small venv per release, the engine's tests and
# (optionally) one fuzz campaign over every target of the engine in each, and a row per release in docs/compat.md.
#
# Per-engine settings live in scripts/engines/ENGINE.env (a bash fragment): DIST (PyPI name), PIP_SPEC (pip
# requirements with {release}), DEFAULT_RELEASES, TEST_GLOB, TARGET_PREFIX, optional LABEL, PRE_INSTALL (a
# shell command run inside the release venv first, e.g. CMAKE_ARGS for a source build), RELEASE_PINS
# ("RELEASE=REQ[,REQ...] ...": requirements installed beside that release only, e.g. the mlx[cpu] its metadata asks
# for; each NAME[extra]==VERSION of them is checked after the build, like DIST), FINDINGS (the Python modules
# of the engine's findings tables, for scripts/engine_compat.py), RUN_ENV ("VAR=VALUE ..." exported for the tests
# and campaigns, e.g. the Triton interpreter's TRITON_INTERPRET=1) and BUILD_CMD (a command that builds the venv itself,
# with {release} and {venv} substituted, in place of PIP_SPEC's install: vllm.env, whose block managers need the
# --no-deps install of scripts/install_serving_cores.sh; the command is idempotent on its own, and the venv is
# neither deleted first nor given the dev venv's site-packages).
#
# Each venv (.venv-ENGINE-RELEASE/) holds only what PIP_SPEC installs beyond the dev venv; a .pth file appends
# the dev venv's site-packages (numpy, torch, hypothesis, pytest, ...) and the repository root to sys.path after
# the venv's own, so the release's pins win. Built once; rebuilt when the recipe or the dev venv changes (stamp).
# The build checks that the engine Python imports is the release asked for.
#
# Usage: scripts/engine_matrix.sh ENGINE [--releases "A B newest"] [--fuzz SECONDS] [--write-docs] [--no-tests]
#                                        [--build-only] [--out DIR] [-- extra pytest args]
#   --releases       the releases to run (default: DEFAULT_RELEASES); `newest` is the newest DIST on the index (pip
#                    index versions, else what pip download picks), so a scheduled run tracks new releases
#   --fuzz SECONDS   one `kvwindow fuzz --seed 0 --report` campaign per release over every TARGET_PREFIX target it
#                    lists as available, SECONDS per target; scripts/engine_compat.py writes OUT/compat-ENGINE.md
#   --write-docs     with --fuzz: also write the rows into docs/compat.md (between <!-- engine:ENGINE --> and
#                    <!-- /engine:ENGINE -->) and the README's supported ranges
# Exit 0 when every selected release built and its tests passed, 1 otherwise (fuzz outcomes go to the table).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
ENGINE="${1:-}"
if [ -z "$ENGINE" ] || [ ! -f "scripts/engines/$ENGINE.env" ]; then
  echo "engine_matrix: usage: $0 ENGINE [options]; ENGINE is one of: $(ls scripts/engines | sed 's/\.env$//' | tr '\n' ' ')" >&2
  exit 2
fi
shift
PRE_INSTALL=""
RELEASE_PINS=""
RUN_ENV=""
BUILD_CMD=""
LABEL="$ENGINE"
# shellcheck disable=SC1090
source "scripts/engines/$ENGINE.env"
for var in DIST PIP_SPEC DEFAULT_RELEASES TEST_GLOB TARGET_PREFIX; do
  [ -n "${!var:-}" ] || { echo "engine_matrix: scripts/engines/$ENGINE.env defines no $var" >&2; exit 2; }
done
RELEASES="$DEFAULT_RELEASES"; FUZZ=0; WRITE_DOCS=0; TESTS=1; BUILD_ONLY=0; OUT=".stamp-engine-matrix/$ENGINE"
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
    *) echo "engine_matrix: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
PYTEST_EXTRA=("$@")
# shellcheck disable=SC2086
[ -n "$RUN_ENV" ] && export $RUN_ENV
[ -x "$DEV_VENV/bin/python" ] || { echo "engine_matrix: no dev venv at $DEV_VENV; run 'make setup' first" >&2; exit 2; }
MATRIX_NAME=engine_matrix
# shellcheck source=scripts/matrix_newest.sh
source "$(dirname "$0")/matrix_newest.sh"
resolve_newest "$DIST"
SHARED="$("$DEV_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
PYVER="$("$DEV_VENV/bin/python" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')"
mkdir -p "$OUT"

build() {  # build .venv-$ENGINE-$1 unless its stamp is current
  local rel="$1" venv=".venv-$ENGINE-$1"
  local stamp="$venv/.kvwindow-engine-matrix" pins
  pins="$(pins_of "$rel")"
  if [ -n "$BUILD_CMD" ]; then  # the engine's own build (idempotent): run it every time, it says when it is current
    local cmd="${BUILD_CMD//\{release\}/$rel}"
    (eval "${cmd//\{venv\}/$venv}") || return 1
  else
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$KEY" ]; then return 0; fi
    rm -rf "$venv"
    "$DEV_VENV/bin/python" -m venv --without-pip "$venv"
    printf '%s\n%s\n' "$SHARED" "$PWD" > "$venv/lib/$PYVER/site-packages/zz_kvwindow_shared.pth"
    if [ -n "$PRE_INSTALL" ]; then (source "$venv/bin/activate" && eval "$PRE_INSTALL"); fi
    set -f  # requirements like mlx[cpu]==X are words, not globs
    # shellcheck disable=SC2086
    "$DEV_VENV/bin/python" -m pip --python "$venv/bin/python" install -q ${PIP_SPEC//\{release\}/$rel} $pins
    set +f
  fi
  "$venv/bin/python" -c "import importlib.metadata as md, re, sys; v = md.version('$DIST'); \
sys.exit(0 if v == '$rel' else f'$DIST {v} found, wanted $rel'); \
bad = [f'{n} {md.version(n)} found, wanted {w}' for n, w in re.findall(r'([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==(\S+)', '$pins') \
       if md.version(n) != w]; sys.exit('; '.join(bad) or 0)" || return 1
  echo "  $DIST $rel: $("$venv/bin/python" -m pip --version >/dev/null 2>&1; "$DEV_VENV/bin/python" -m pip --python "$venv/bin/python" list 2>/dev/null | grep -iE "^($DIST|mlx|onnx|onnxruntime|ctranslate2|llama|keras) " | tr -s ' ' | tr '\n' ';')"
  echo "$KEY" > "$stamp"
}
pins_of() {  # the RELEASE_PINS requirements of release $1 (space-separated), or nothing
  local entry
  set -f
  for entry in $RELEASE_PINS; do
    if [ "${entry%%=*}" = "$1" ]; then echo "${entry#*=}" | tr ',' ' '; return 0; fi
  done
}
KEY="$(declare -f build pins_of | sha256sum | cut -c1-16) $SHARED $PIP_SPEC $PRE_INSTALL $RELEASE_PINS $BUILD_CMD"

status=0
start_all=$(date +%s)
for rel in $RELEASES; do
  t0=$(date +%s)
  echo "== $DIST $rel"
  rm -f "$OUT/tests-$rel.txt"
  if ! build "$rel" > "$OUT/build-$rel.log" 2>&1; then
    echo "  build failed: $OUT/build-$rel.log"; tail -3 "$OUT/build-$rel.log"
    echo "build failed" > "$OUT/tests-$rel.txt"; status=1; continue
  fi
  cat "$OUT/build-$rel.log"
  [ "$BUILD_ONLY" = 1 ] && continue
  py=".venv-$ENGINE-$rel/bin/python"
  if [ "$TESTS" = 1 ]; then
    set +e
    # shellcheck disable=SC2086
    "$py" -m pytest -q -p no:cacheprovider $TEST_GLOB "${PYTEST_EXTRA[@]}" > "$OUT/pytest-$rel.log" 2>&1
    rc=$?
    set -e
    summary="$(grep -E '[0-9]+ (passed|failed|error|skipped)' "$OUT/pytest-$rel.log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//' || true)"
    [ $rc -gt 1 ] && [ $rc -ne 5 ] && summary="pytest died (exit $rc)"
    [ -z "$summary" ] && summary="exit $rc"
    echo "$summary" > "$OUT/tests-$rel.txt"
    if [ $rc -ne 0 ]; then status=1; tail -n 40 "$OUT/pytest-$rel.log" | sed 's/^  | //'; fi
    echo "  tests: $summary"
  fi
  if [ "$FUZZ" != 0 ]; then
    "$py" -m fuzz.cli fuzz --list-targets > "$OUT/targets-$rel.txt" 2> "$OUT/targets-$rel.err" || true
    targets=()
    while read -r name _ avail _; do
      case "$name" in "$TARGET_PREFIX"*) [ "$avail" = available ] && targets+=(--target "$name") ;; esac
    done < "$OUT/targets-$rel.txt"
    n=$(( ${#targets[@]} / 2 ))
    rm -rf "$OUT/report-$rel.json" "$OUT/seeds-$rel" "$OUT/db-$rel"
    if [ "$n" -gt 0 ]; then
      set +e
      "$py" -m fuzz.cli fuzz "${targets[@]}" --time $(( FUZZ * n )) --seed 0 --plain --report "$OUT/report-$rel.json" \
        --seeds-dir "$OUT/seeds-$rel" --db "$OUT/db-$rel" > "$OUT/fuzz-$rel.log" 2>&1
      rc=$?
      set -e
      case $rc in 0) r=clean ;; 1) r="findings (known or new)" ;; 3) r="harness fault" ;; *) r="rc=$rc" ;; esac
    else
      r="no target available"
    fi
    echo "  fuzz ($n targets, $FUZZ s each): $r"
    grep -E "^(known finding|finding|FAILED)" "$OUT/fuzz-$rel.log" 2>/dev/null | sed 's/^/  | /' || true
  fi
  echo "  ($(( $(date +%s) - t0 )) s)"
done
[ "$BUILD_ONLY" = 1 ] && { echo "built in $(( $(date +%s) - start_all )) s"; exit 0; }
write=()
[ "$WRITE_DOCS" = 1 ] && write=(--write)
"$DEV_VENV/bin/python" scripts/engine_compat.py "$ENGINE" --reports "$OUT" --seconds "$FUZZ" --releases "$RELEASES" "${write[@]}" \
  || status=1
echo "engine_matrix: $(( $(date +%s) - start_all )) s for $(echo $RELEASES | wc -w) $DIST releases; logs and $OUT/compat-$ENGINE.md in $OUT/"
exit $status
