#!/usr/bin/env bash
# A slow machine is never a finding (DESIGN §4), proved on a loaded one: with 3 CPU-bound processes and a
# disk writer beside it, a default campaign (every installed target, the engines included; --accept-known) and
# the seed replays must exit 0, and nothing new may appear in fuzz/seeds/ (nor ./kvwindow-seeds/).
# The load processes are killed whatever happens (trap). Usage: scripts/ci_load.sh [SECONDS] (default 60).
# PY picks the interpreter (default .venv/bin/python, what `make setup` builds).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
SECS=${1:-60}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

if [ -n "$(git status --porcelain -- fuzz/seeds kvwindow-seeds)" ]; then
  echo "ci_load: fuzz/seeds/ or kvwindow-seeds/ has uncommitted changes before the run; commit or remove them first" >&2
  git status --porcelain -- fuzz/seeds kvwindow-seeds >&2
  exit 2
fi

for _ in 1 2 3; do python3 -c 'while True: pass' & pids+=($!); done
# Disk churn: 64 MiB written and synced, over and over (what concurrent installs and test suites do to the page cache).
( while true; do dd if=/dev/zero of="$work/churn" bs=1M count=64 conv=fsync status=none; rm -f "$work/churn"; done ) &
pids+=($!)
echo "ci_load: load started (3 CPU-bound processes, 1 disk writer: pids ${pids[*]}); $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

start=$SECONDS
rc=0
"$PY" -m fuzz.cli fuzz --time "$SECS" --workers auto --accept-known --plain --report "$work/report.json" || rc=$?
echo "ci_load: default campaign exit $rc after $((SECONDS - start)) s"
if [ "$rc" != 0 ]; then
  [ -f "$work/report.json" ] && "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps({k: d[k] for k in ("failures","harness_faults","worker_errors","slow")}, indent=1)[:4000])' "$work/report.json"
  echo "ci_load: FAILED: the default campaign under load must exit 0" >&2
  exit 1
fi
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("ci_load: slow, not findings:", len(d.get("slow", [])))' "$work/report.json"

start=$SECONDS
# The replays on the targets that run in a supervised child by default (ring-c, paged-c, cuda-*, ct2:*): the
# only ones with a time limit, so the only ones a busy machine could fail (`make test` replays all of them;
# CI_LOAD_REPLAYS=all here too).
select=(-k "ring-c or paged-c or cuda- or ct2:")
[ "${CI_LOAD_REPLAYS:-isolated}" = all ] && select=()
"$PY" -m pytest -q -p no:cacheprovider tests/test_seed_replay.py "${select[@]}" \
  || { echo "ci_load: FAILED: seed replays under load" >&2; exit 1; }
echo "ci_load: seed replays passed in $((SECONDS - start)) s"

new=$(git status --porcelain -- fuzz/seeds kvwindow-seeds)
if [ -n "$new" ]; then
  echo "ci_load: FAILED: seeds were saved under load:" >&2
  echo "$new" >&2
  exit 1
fi
echo "ci_load: ok (nothing found, nothing saved) in ${SECONDS} s"
