"""Hugging Face transformers' sliding-window cache layers as campaign targets.

``hf-dynamic`` / ``hf-static``: one sliding-window layer driven through
  ``update`` with the campaign's K/V payloads. After every op the adapter checks
  (1) the rows ``update`` returned for attention contain every key the chunk's
  queries attend to (version-independent), (2) returned and stored rows equal
  the convention pinned from the installed release's source
  (:mod:`impl.hf.conventions`, checked against its restatement with
  ``pyspec.last_window`` in :mod:`fuzz.targets.hf.conventions`: e.g. the 5.x dynamic layer stores
  ``lastWindow (W-1)``, the static one ``lastWindow W``), and (3) on the 5.x
  API, the rows ``get_mask_sizes`` advertises are the rows returned.

The model targets ``hf-mistral`` / ``hf-gemma2`` are :mod:`fuzz.targets.hf.models`.
Cases that hit a written-up finding (:mod:`fuzz.targets.hf.findings`) are run and reported as
reproduced or not (:class:`fuzz.targets.hf.base.HFTarget`). The factories probe the adapter first
(:func:`impl.hf.caches.probe`): a release whose cache API it cannot drive makes the target unavailable.
"""

from __future__ import annotations

from typing import Optional

from fuzz.ops import Case, Op, Reset
from fuzz.oracle import PAYLOAD_WIDTH, SpecStream
from fuzz.targets.base import Mismatch, RunStats, Target
from fuzz.targets.hf import conventions as hf_conventions
from fuzz.targets.hf.base import HFTarget, _hf, probed


class HFCacheTarget(HFTarget):
    """``hf-dynamic`` (kind ``"dynamic"``) or ``hf-static`` (kind ``"static"``)."""

    kind = "cache"
    window_max = 64
    max_tokens = 200

    def __init__(self, cache_kind: str, *, strict: bool = False, window_shift: int = 0,
                 layer_class: Optional[type] = None, name: Optional[str] = None, width: int = PAYLOAD_WIDTH):
        self.info = _hf()
        self.cache_kind, self.strict, self.window_shift = cache_kind, strict, window_shift
        self.finding_kind = cache_kind
        self.layer_class, self.width = layer_class, width
        self.name = name or f"hf-{cache_kind}"

    def _driver(self, window: int):
        from impl.hf.caches import LayerDriver

        return LayerDriver(self.cache_kind, window, self.width, window_shift=self.window_shift,
                           layer_class=self.layer_class)

    def run_case(self, case: Case) -> RunStats:
        window, ops = case.window, case.ops
        import numpy as np

        from impl.hf.caches import decode_rows
        from impl.hf.conventions import required_for_attention

        spec = SpecStream(window, self.width)
        stats = RunStats()
        drv = self._driver(window)
        table: dict[tuple, int] = {}
        for i, op in enumerate(ops):
            if isinstance(op, Reset):
                if op.window == drv.window:
                    drv.reset()  # HF's own reset on the same object
                else:
                    drv = self._driver(op.window)
                stats.phases |= spec.apply(op)
                table = {}
                self._check_stored(drv, spec, table, i, op)
                continue
            k = op.tokens
            n = spec.n
            positions, keys, vals = (a.astype(np.float64) if a.ndim == 2 else a for a in spec.new_entries(k))
            for j, p in enumerate(positions.tolist()):
                table[tuple(keys[j].tolist())] = p
                table[("v",) + tuple(vals[j].tolist())] = p
            want_mask = drv.expected_mask_rows(n, k)
            got_mask = drv.mask_rows(k)
            try:
                rk, rv = drv.update(keys, vals)
            except Exception as e:  # noqa: BLE001 - transformers' raise on a valid op is a disagreement too
                raise self.raised(i, op, f"update() with {k} rows after {n} tokens", e) from e
            stats.phases |= spec.apply(op)
            stats.tokens += k
            returned = decode_rows(rk, rv, table)
            want_ret, _ = drv.convention(n, k)
            hf_conventions.check(self.info.api, self.cache_kind, n, k, drv.window)  # adapter == spec restatement
            need = required_for_attention(n, k, drv.window)
            missing = [p for p in need if p not in returned]
            if k and missing:
                raise Mismatch(self.name, i, op, f"update() returned rows for positions {returned}; attention "
                                                 f"over window W={drv.window} also needs {missing}")
            if returned != want_ret:
                raise Mismatch(self.name, i, op, f"update() returned positions {returned}, pinned convention "
                                                 f"({self.info.api}/{self.cache_kind}, n={n}, k={k}, W={drv.window}) "
                                                 f"says {want_ret}")
            if got_mask is not None and want_mask is not None and got_mask != want_mask:
                raise Mismatch(self.name, i, op, f"get_mask_sizes({k}) advertises positions {got_mask}, "
                                                 f"pinned convention says {want_mask}")
            if got_mask is not None and k and len(got_mask) != len(returned):
                raise Mismatch(self.name, i, op, f"get_mask_sizes({k}) advertises {len(got_mask)} rows but "
                                                 f"update() returned {len(returned)}")
            self._check_stored(drv, spec, table, i, op)
        return stats

    def _check_stored(self, drv, spec: SpecStream, table: dict, i: int, op: Op) -> None:
        from impl.hf.caches import decode_rows
        import pyspec

        sk, sv = drv.stored()
        stored = decode_rows(sk, sv, table)
        _, want = drv.convention(spec.n, 0) if spec.n else ([], [])
        if spec.n == 0:
            want = [None] * len(stored) if all(s is None for s in stored) else []
        # Tie the pinned convention to the spec explicitly: the real rows are a lastWindow.
        real = [p for p in want if p is not None]
        assert real == pyspec.last_window(len(real), range(spec.n)), "convention is not a lastWindow"
        if stored != want:
            raise Mismatch(self.name, i, op, f"stores positions {stored}, pinned convention "
                                             f"({self.info.api}/{self.cache_kind}, W={drv.window}, n={spec.n}) "
                                             f"says {want} (spec lastWindow W: {spec.positions()})")


def make_hf_dynamic() -> Target:
    from impl.hf.caches import probe

    _hf()
    probed(probe, "dynamic")
    return HFCacheTarget("dynamic")


def make_hf_static() -> Target:
    from impl.hf.caches import probe

    _hf()
    probed(probe, "static")
    return HFCacheTarget("static")
