#!/usr/bin/env bash
# CI for the oldest supported transformers: the HF tests in its own small venv (scripts/hf_matrix.sh,
# which shares the dev venv's torch and verifies that the release's own pins win).
# Usage: scripts/ci_hf_older.sh [extra pytest args]   (HF_RELEASE overrides the release)
set -euo pipefail
cd "$(dirname "$0")/.."
make -s setup
exec bash scripts/hf_matrix.sh --releases "${HF_RELEASE:-4.45.2}" -- "$@"
