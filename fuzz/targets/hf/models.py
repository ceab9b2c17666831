"""``hf-mistral`` / ``hf-gemma2``: tiny random-weight models (:mod:`impl.hf.models`), driven the way
users drive them, held to the reference.

Each case (window + ops) runs in two modes, each with ``attn_implementation``
``"eager"`` and ``"sdpa"`` (Gemma 2 on transformers 5.x declares
``_supports_sdpa = False`` — soft-capping — so it runs eager only there):

* **manual** — ``Chunk(n)`` is one forward call with ``n`` tokens (the first of
  a stream is the prefill; ``n = 0`` is no call), ``Push`` one decode call;
  the first call creates the model's default cache, later calls pass it back
  (transformers 4.45: an explicit ``DynamicCache()`` for Mistral and a
  ``HybridCache`` sized to the stream for Gemma 2, plus ``cache_position``,
  as its docs tell users).
* **generate** — greedy ``generate()`` with the model's default cache:
  ``Chunk(n)`` appends ``n`` user tokens, a run of ``Push`` ops after them (empty
  chunks between them feed nothing) is that many generated tokens (one ``generate(max_new_tokens=g)`` call that
  continues on the same cache, multi-turn style); ``output_logits`` gives the
  logits of every generated step. A stream's first ``Push`` with nothing before it
  is a one-token prompt; a trailing chunk with nothing generated after it is
  a manual forward on the same cache.

``Reset(w)`` builds the model again from the same weights with
``sliding_window = w`` and starts a new cache.

Every logit row any call returns is compared with :func:`impl.hf.reference.forward`
over the stream's full history, and after every op each sliding layer's stored
keys are compared with the reference keys at the positions the pinned cache
convention names (:mod:`impl.hf.conventions`, checked against the spec by
:func:`fuzz.targets.hf.conventions.check`).

Tolerance: ``|hf - ref| <= ATOL + RTOL * |ref|`` with ``ATOL = RTOL = 1e-4``.
The models run in float64, but transformers computes RMSNorm, RoPE and the
eager softmax in float32 (e.g. 5.24.0 modeling_mistral.py lines 192-197,
modeling_gemma2.py ``_norm(x.float())``), so agreement is at float32 rounding
(observed max error ~1e-6 on logits of magnitude ~10); a window off by one
moves logits by 1e-2 .. 1 with these weights (see ``tests/test_hf_models.py``).
"""

from __future__ import annotations

import hashlib
from typing import Optional, Sequence

import numpy as np
import torch

from fuzz.ops import Case, Chunk, Op, Push
from fuzz.targets.base import Mismatch, RunStats, Target
from fuzz.targets.hf import conventions as hf_conventions
from fuzz.targets.hf.base import HFTarget, _hf, case_stats, probed
from impl.decoder import torch_threads
from impl.hf import reference
from impl.hf.models import VOCAB, TinyModels, attn_impls

ATOL = 1e-4
RTOL = 1e-4


def _case_seed(case: Case) -> int:
    return int.from_bytes(hashlib.sha256(f"{case.window}|{case.text}".encode()).digest()[:4], "little")


class HFModelTarget(HFTarget):
    kind = "model"
    window_max = 16
    max_tokens = 40

    def __init__(self, arch: str, *, strict: bool = False, window_shift: int = 0, name: Optional[str] = None,
                 modes: Sequence[str] = ("manual", "generate"), attns: Optional[Sequence[str]] = None,
                 seed: int = 0):
        self.models = TinyModels(arch, window_shift=window_shift, seed=seed)
        self.info = self.models.info
        self.arch, self.strict, self.window_shift = arch, strict, window_shift
        self.finding_kind = arch
        self.name = name or f"hf-{arch}"
        self.modes = tuple(modes)
        self.attns = tuple(attns) if attns is not None else tuple(attn_impls(arch))
        self.state = self.models.state

    def tolerances(self) -> dict[str, dict[str, float]]:
        """Logits against this project's reference forward: ``|hf - ref| <= atol + rtol * |ref|``."""
        return {"logits": {"atol": ATOL, "rtol": RTOL}}

    # -- the pinned cache convention

    def _convention(self, n: int, window: int) -> Optional[list]:
        """Stored positions the pinned convention names after ``n`` tokens (checked against the spec)."""
        key = self.models.cache_convention()
        return None if key is None else hf_conventions.check(*key, n, 0, window)[1]

    # -- running a case

    def run_case(self, case: Case) -> RunStats:
        stats = case_stats(case)
        base = _case_seed(case)
        with torch_threads(1):  # tiny matrices: one thread is ~10x faster than contending ones
            for mode in self.modes:
                for attn in self.attns:
                    self._run_mode(mode, attn, case, base)
        return stats

    def _run_mode(self, mode: str, attn: str, case: Case, base: int) -> None:
        for epoch, (w, seg) in enumerate(case.streams()):
            total = sum(op.tokens for _, op in seg)
            if total == 0:
                continue
            rng = np.random.default_rng([base, epoch])
            model = self.models.model(w, attn)
            history: list[int] = []
            logit_rows: list[tuple[int, Op, list[int], torch.Tensor]] = []  # (op index, op, positions, logits)
            snaps: list[tuple[int, Op, int, dict]] = []  # (op index, op, tokens fed, stored keys)
            cache = self.models.new_cache(model, total)
            fed = 0
            tag = f"[{mode}/{attn}]"

            def forward(ids_new: list[int], i: int, op: Op):
                nonlocal cache, fed
                start = fed
                try:
                    logits, cache2 = self.models.call(model, history[fed:], cache, fed)
                except Exception as e:  # noqa: BLE001
                    raise self.raised(i, op, f"{tag} forward of {len(history) - fed} tokens at position {fed} "
                                             f"(W={w})", e) from e
                cache = cache2 if cache is None else cache
                positions = list(range(start, len(history)))
                logit_rows.append((i, op, positions, logits[-len(positions):]))
                fed = len(history)
                snaps.append((i, op, fed, self.models.stored_keys(cache)))

            if mode == "manual":
                for i, op in seg:
                    k = op.tokens
                    if k == 0:
                        continue
                    history.extend(int(t) for t in rng.integers(3, VOCAB, size=k))
                    forward(history, i, op)
            else:
                j = 0
                while j < len(seg):
                    i, op = seg[j]
                    if isinstance(op, Chunk) and op.n == 0:
                        j += 1
                        continue
                    if isinstance(op, Chunk) or not history:
                        k = op.tokens
                        history.extend(int(t) for t in rng.integers(3, VOCAB, size=k))
                        # The generated tokens: every push up to the next chunk that feeds tokens
                        # (an empty chunk between them feeds nothing, so it does not end the run).
                        pushes, end = [], j + 1
                        while end < len(seg) and (isinstance(seg[end][1], Push) or seg[end][1].tokens == 0):
                            if isinstance(seg[end][1], Push):
                                pushes.append(seg[end])
                            end += 1
                        g = len(pushes)
                        if g == 0:
                            forward(history, i, op)
                            j += 1
                            continue
                        gi, gop = pushes[-1]
                        prompt_len = len(history)
                        try:
                            new, logits, cache2 = self.models.generate(model, history, cache, g)
                        except Exception as e:  # noqa: BLE001
                            raise self.raised(gi, gop, f"{tag} generate(max_new_tokens={g}) after a "
                                                       f"{prompt_len}-token prompt (W={w})", e) from e
                        cache = cache2
                        if len(new) != g:
                            raise Mismatch(self.name, gi, gop, f"{tag} generate returned {len(new)} tokens, "
                                                               f"asked for {g}")
                        history.extend(new)
                        fed = len(history) - 1  # the last generated token is not fed back yet
                        for s, (si, sop) in enumerate(pushes):
                            logit_rows.append((si, sop, [prompt_len - 1 + s], logits[s:s + 1]))
                        snaps.append((gi, gop, fed, self.models.stored_keys(cache)))
                        j = end
                    else:
                        raise AssertionError(f"{tag} push at op #{i} neither starts a prompt nor follows one: "
                                             "it would go unchecked")
            self._check(w, history, logit_rows, snaps, tag, attn)

    def _check(self, w: int, history: list[int], logit_rows, snaps, tag: str, attn: str) -> None:
        spec = self.models.ref_spec(w, attn)  # like with like: sdpa's dropped soft-cap (impl.hf.models)
        ref_logits, ref_keys = reference.forward(spec, self.state, history)
        events = [(i, 0, op, ("logits", pos, lg)) for i, op, pos, lg in logit_rows]
        events += [(i, 1, op, ("keys", fed, ks)) for i, op, fed, ks in snaps]
        for i, _, op, ev in sorted(events, key=lambda e: (e[0], e[1])):
            if ev[0] == "logits":
                _, pos, lg = ev
                ref = ref_logits[pos]
                if lg.shape != ref.shape:
                    raise Mismatch(self.name, i, op, f"{tag} logits shape {tuple(lg.shape)} != {tuple(ref.shape)}")
                err = (lg - ref).abs()
                bad = ~(err <= ATOL + RTOL * ref.abs())  # a NaN disagrees too
                if bad.any():
                    r = int(bad.any(dim=-1).nonzero()[0])
                    raise Mismatch(self.name, i, op,
                                   f"{tag} logits at position {pos[r]} (W={w}, history {len(history)} tokens) differ "
                                   f"from the reference full-mask forward by {err[r].max().item():.3g} "
                                   f"(tolerance {ATOL:g} + {RTOL:g}*|ref|)")
            else:
                _, fed, ks = ev
                want = self._convention(fed, w)
                if want is None:
                    continue
                for layer, got in ks.items():
                    if got is None:
                        if any(p is not None for p in want):
                            raise Mismatch(self.name, i, op, f"{tag} layer {layer} stores nothing after {fed} "
                                                             f"tokens; convention says positions {want}")
                        continue
                    if got.shape[1] != len(want):
                        raise Mismatch(self.name, i, op, f"{tag} layer {layer} stores {got.shape[1]} rows after "
                                                         f"{fed} tokens (W={w}); convention says positions {want}")
                    for r, p in enumerate(want):
                        ref = torch.zeros_like(got[:, r]) if p is None else ref_keys[layer][:, p]
                        if not torch.allclose(got[:, r], ref, atol=ATOL, rtol=RTOL):
                            raise Mismatch(self.name, i, op,
                                           f"{tag} layer {layer} row {r} after {fed} tokens (W={w}) is not the "
                                           f"reference key of position {p} (convention: positions {want})")


def make_hf_mistral() -> Target:
    from impl.hf.models import probe

    _hf()
    probed(probe, "mistral")
    return HFModelTarget("mistral")


def make_hf_gemma2() -> Target:
    from impl.hf.models import probe

    _hf()
    probed(probe, "gemma2")
    return HFModelTarget("gemma2")
