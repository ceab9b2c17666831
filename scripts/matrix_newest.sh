# Sourced by scripts/hf_matrix.sh and scripts/engine_matrix.sh: `newest` in --releases is the newest release on
# the index pip is configured for. Needs DEV_VENV (a venv with pip), MATRIX_NAME (the caller's name, for messages)
# and RELEASES (the caller's list, rewritten in place by resolve_newest DIST).
newest_release() {  # the newest release of PyPI distribution $1 on the index pip is configured for
  local dist="$1" v tmp
  v="$("$DEV_VENV/bin/python" -m pip index versions "$dist" 2>/dev/null | sed -n '1s/^[^ ]* (\(.*\))$/\1/p')"
  if [ -z "$v" ]; then  # `pip index` is experimental: fall back to what `pip download` picks
    tmp="$(mktemp -d)"
    "$DEV_VENV/bin/python" -m pip download -q --no-deps -d "$tmp" "$dist" >/dev/null 2>&1 || true
    v="$(ls "$tmp" | sed -n 's/^[^-]*-\([0-9][^-]*\)\(-.*\.whl\|\.tar\.gz\|\.zip\)$/\1/p' | head -1)"
    rm -rf "$tmp"
  fi
  [ -n "$v" ] || { echo "$MATRIX_NAME: cannot find the newest $dist on the index (pip index versions / pip download)" >&2; return 1; }
  echo "$v"
}
resolve_newest() {  # $RELEASES with the word `newest` replaced by the index's newest release of $1
  local out="" rel
  for rel in $RELEASES; do
    if [ "$rel" = newest ]; then rel="$(newest_release "$1")" || exit 2; echo "$MATRIX_NAME: newest $1 on the index: $rel" >&2; fi
    case " $out " in *" $rel "*) ;; *) out="$out $rel" ;; esac
  done
  RELEASES="${out# }"
}
