#!/usr/bin/env bash
# The Lean proofs, checked without elan (CI: .ci/run; by hand: `bash scripts/lean_check.sh`).
#
# 1. scripts/lean_check.py checks lean/ (Lean v4.28 compiled to WebAssembly under Node 26, installed
#    on first use under /tmp by npm): every error of the proofs fails this script.
# 2. The check must be able to fail: a copy of lean/ with one false theorem injected into
#    KVWindow/Window.lean (`1 + 1 = 3 := by decide`, before its closing `end`) must make the checker
#    exit 1 and name that file and line. Both elaborations run at the same time (each is one process, mostly
#    waiting on its own import of Init), so the pair costs about one check of wall time.
#
# Exit: 0 both as expected; 1 an error of the proofs, or the injected error was not reported where it
# was put; 3 the checker could not run (npm, Node). npm failures are not skipped: the proofs gate CI.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

inject_dir=$(mktemp -d /tmp/kvwindow-lean-inject.XXXXXX)
trap 'rm -rf "$inject_dir"' EXIT
cp -r lean "$inject_dir/lean"
target="$inject_dir/lean/KVWindow/Window.lean"
# A new theorem, false, at the end of a real module (before its closing `end`): the line is known.
line=$(grep -n '^end KVWindow' "$target" | tail -1 | cut -d: -f1)
sed -i "${line}i theorem injected_false : 1 + 1 = 3 := by decide" "$target"

# Install once before the two runs (they would race on the first install).
"$PY" scripts/lean_check.py --install-only

start=$SECONDS
"$PY" scripts/lean_check.py > "$inject_dir/main.log" 2>&1 & main_pid=$!
"$PY" scripts/lean_check.py --lean-dir "$inject_dir/lean" > "$inject_dir/inject.log" 2>&1 & inject_pid=$!
set +e
wait "$main_pid"; main_rc=$?
wait "$inject_pid"; inject_rc=$?
set -e
cat "$inject_dir/main.log"
echo "lean_check.sh: lean/ checked in $((SECONDS - start)) s (exit $main_rc)"

want="lean/KVWindow/Window.lean:${line}:"
if [ "$inject_rc" -ne 1 ] || ! grep -q "^${want}.* error: " "$inject_dir/inject.log"; then
  cat "$inject_dir/inject.log"
  echo "lean_check.sh: the injected error (${want}) was not reported (exit $inject_rc): the check cannot fail"
  exit 1
fi
echo "lean_check.sh: injected error found as expected: $(grep -m1 "^${want}" "$inject_dir/inject.log")"
exit "$main_rc"
