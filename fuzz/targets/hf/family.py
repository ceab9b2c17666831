"""``hf:<model_type>``: every sliding-window model family of the installed transformers
(:mod:`impl.hf.families`), driven by the op language the way users drive a model, held to the spec's mask.

``hf:<model_type>`` runs every CPU attention implementation the family offers without compiling
(``eager``, ``sdpa`` where its class declares it); ``hf:<model_type>@<attn>[,<attn>...]`` runs the ones
named, ``flex_attention`` included (tried once in a child process first: its CPU kernels are compiled by
inductor; about 30 s on 5.24.0 with a warm inductor cache, a second child without the window when the first dies,
49 s alone cold; the target is unavailable with the reasons only when both die, :func:`impl.errors.window_probe`).
A death with the window only is this target's crash (:meth:`HFFamilyTarget.probe_crashes`: the probe's stream as
a case, :func:`probe_case`), which the campaign reports before its first case (DESIGN §4).

Each case runs, per attention implementation and per stream of the case (``Reset(w)`` starts one with
window ``w``; a stream's tokens are drawn from a seed of the case, so a seed replays identically):

* **manual** — the stream on one cache: each op that feeds tokens is one forward call (``Chunk(n)``
  ``n`` tokens, ``Push`` one; the first call is the prefill; ``chunk:0`` makes no call);
* **manual, left-padded batch** — two rows on one cache: row 1 is the stream behind ``p`` pad
  columns (``p`` = 1..3 from the case's seed), row 0 an unpadded stream ``p`` tokens longer; the
  pad columns join the first call;
* **generate** — greedy ``generate()`` of the same two-row padded batch: ``Chunk(n)`` appends ``n``
  user tokens, a run of ``Push`` ops after them is that many generated tokens (one call; a stream's
  first ``Push`` with nothing before it is a one-token prompt); every call starts from the whole
  history on a fresh cache (``Family.generate``). Chunks with nothing generated after them are
  checked by the manual modes.

The reference (:meth:`impl.hf.families.Family.reference_logits`) is the same weights with the window
disabled, run once over each row's whole history without a cache, every layer attending through a
mask built here from the spec (:func:`spec_masks`: ``pyspec.in_window`` over absolute positions for
sliding layers, causal for full ones, never a pad column) — so a window ignored on both paths, an
off-by-one in the model's mask and a cache eviction bug all show. Every logit row of every call is
compared at ``|got - ref| <= ATOL + RTOL * |ref|`` (:data:`impl.hf.families.ATOL` / ``RTOL``; a NaN is
a disagreement).

Like with like (per family, :mod:`impl.hf.families`): the reference runs the same attention
implementation, so a quirk a kernel cannot express is the same on both sides — Gemma 2's sdpa drops
attention soft-capping on the releases that offer it; gpt-oss's attention sinks live in each
implementation's attention function; Gemma 3 and Cohere 2 compute local and global RoPE in the shared
model code. Eager attention in float64 turns a fully masked pad row into NaN that reaches real rows
(its softmax runs in float32 over float64's minimum), so the padded batches under eager run the
family in float32 (flex attention's CPU kernel takes float32 only too); everything else is float64.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Optional, Sequence

import numpy as np
import torch

import pyspec
from fuzz.ops import Case, Chunk, Op, Push
from fuzz.targets.base import Mismatch, RunStats, Target, TargetError
from fuzz.targets.hf.base import HFTarget, _hf, case_stats, probed
from impl.decoder import torch_threads
from impl.hf import compat, families
from impl.hf.families import ATOL, RTOL, VOCAB, Family, positions

MODES = ("manual", "padded", "generate")


class FamilyMismatch(Mismatch):
    """A disagreement of one mode; ``padded`` says it was in a left-padded row (what the
    ``hf-gemma2-padded-decode-mask`` finding explains)."""

    def __init__(self, target: str, index: int, op: Optional[Op], detail: str, *, padded: bool = False):
        super().__init__(target, index, op, detail)
        self.padded = padded


@lru_cache(maxsize=256)
def _in_window_table(window: int, length: int) -> torch.Tensor:
    """``[t, p] = pyspec.in_window(window, t, p)`` for positions below ``length`` (Lean ``inWindow``)."""
    return torch.tensor([[pyspec.in_window(window, t, p) for p in range(length)] for t in range(length)],
                        dtype=torch.bool)


def spec_masks(layer_types: Sequence[str], window: int, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Boolean ``[B, 1, T, T]`` masks per layer type from the spec: in a sliding layer the query at
    position ``t`` sees ``p`` iff ``pyspec.in_window(window, t, p)``; in a full layer iff ``p <= t``; a pad
    column (``attention_mask`` 0) is never seen. Positions count each row's real tokens from 0."""
    B, T = attention_mask.shape
    pos = positions(attention_mask)
    real = attention_mask.bool()
    table = _in_window_table(window, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    out = {}
    for kind in set(layer_types):
        m = torch.zeros(B, 1, T, T, dtype=torch.bool)
        for b in range(B):
            p = pos[b]
            seen = table[p][:, p] if kind == "sliding_attention" else causal[p][:, p]
            m[b, 0] = seen & real[b][None, :] & causal
        out[kind] = m
    return out


def _case_seed(case: Case) -> int:
    return int.from_bytes(hashlib.sha256(f"{case.window}|{case.text}".encode()).digest()[:4], "little")


def pad_of(case: Case) -> int:
    """Pad columns of the case's left-padded batch: 1..3, from the case's seed."""
    return 1 + _case_seed(case) % 3


class HFFamilyTarget(HFTarget):
    kind = "model"
    window_max = 16
    max_tokens = 24

    def __init__(self, model_type: str, *, attns: Optional[Sequence[str]] = None, strict: bool = False,
                 window_shift: int = 0, ignore_window: bool = False, modes: Sequence[str] = MODES,
                 seed: int = 0, name: Optional[str] = None):
        bad = [m for m in modes if m not in MODES]
        if bad:
            raise ValueError(f"modes {bad} are not among {MODES}")
        self.family = Family(model_type, seed=seed, window_shift=window_shift, ignore_window=ignore_window)
        self.info = self.family.info
        self.model_type, self.strict, self.modes = model_type, strict, tuple(modes)
        self.finding_kind = f"hf:{model_type}"
        self.name = name or f"hf:{model_type}" + (f"@{','.join(attns)}" if attns else "")
        offered = self.family.attn_impls(flex=bool(attns) and "flex_attention" in attns)
        if attns:
            missing = [a for a in attns if a not in offered]
            if missing:
                why = "; ".join(f"{a}: {self.family.attn_unavailable.get(a, 'not a CPU attention implementation')}"
                                for a in missing)
                raise compat.HFUnavailable(f"{self.name}: transformers {self.info.transformers} does not run {why}")
        self.attns = tuple(attns) if attns else tuple(offered)
        self._padded_families: dict[str, object] = {}

    def findings_here(self) -> list:
        """The rows for ``hf:<model_type>`` and those for one of its attention implementations
        (``hf:<model_type>@<attn>``: a finding of one implementation's kernel, as flex attention's compile crash)."""
        from fuzz.targets.hf.findings import applicable

        rows = super().findings_here()
        for attn in self.attns:
            rows += applicable(f"{self.finding_kind}@{attn}", self.info.transformers, self.versions())
        return rows

    def probe_crashes(self) -> list:
        """Each attention implementation whose availability probe died with the window and ran without it
        (:attr:`impl.hf.families.Family.probe_crashes`), as a crash of this target: the probe's stream as a case
        (:func:`probe_case`; replaying it makes the probe's cached calls) and its death."""
        from fuzz.targets.probes import probe_crash

        calls = "+".join(str(n) for n in families.PROBE_CALLS)
        return [probe_crash(self, probe_case(), f"the {attn} availability probe (a child process: cached calls of "
                                                f"{calls} tokens at W={families.PROBE_WINDOW})", death)
                for attn, death in self.family.probe_crashes.items() if attn in self.attns]

    def tolerances(self) -> dict[str, dict[str, float]]:
        """Logits against the spec-masked reference: ``|got - ref| <= atol + rtol * |ref|``."""
        return {"logits": {"atol": ATOL, "rtol": RTOL}}

    def versions(self) -> dict[str, str]:
        tol = self.tolerances()["logits"]
        return dict(super().versions(), attention=",".join(self.attns),
                    tolerance=f"|logits - ref| <= {tol['atol']:g} + {tol['rtol']:g} * |ref|")

    # -- what the findings see

    def finding_views(self, case: Case) -> list[Case]:
        """The case, and the column stream of its padded batch (the first call of each stream ``p`` wider)."""
        if "padded" not in self.modes and "generate" not in self.modes:
            return [case]
        p, ops, first = pad_of(case), list(case.ops), True
        for i, op in enumerate(ops):
            if not isinstance(op, (Push, Chunk)):
                first = True
            elif first and op.tokens > 0:
                ops[i], first = Chunk(op.tokens + p), False
        return [case, case.replace_ops(ops)]

    # -- running a case

    def _family_for(self, attn: str, padded: bool):
        """Float32 for left-padded eager (float64 eager NaNs through pad rows); the float64 family else."""
        if not (padded and attn == "eager"):
            return self.family
        if attn not in self._padded_families:
            f = self.family
            self._padded_families[attn] = Family(f.model_type, seed=f.seed, window_shift=f.window_shift,
                                                 ignore_window=f.ignore_window, dtype=torch.float32)
        return self._padded_families[attn]

    def run_case(self, case: Case) -> RunStats:
        stats = case_stats(case)
        base, p = _case_seed(case), pad_of(case)
        with torch_threads(1):  # tiny matrices: one thread is ~10x faster than contending ones
            for epoch, (w, seg) in enumerate(case.streams()):
                fed = [(i, op) for i, op in seg if op.tokens > 0]
                if not fed:
                    continue
                rng = np.random.default_rng([base, epoch])
                T = sum(op.tokens for _, op in fed)
                row = torch.tensor(rng.integers(3, VOCAB, size=(1, T)), dtype=torch.long)
                longer = torch.tensor(rng.integers(3, VOCAB, size=(1, T + p)), dtype=torch.long)
                ids2 = torch.cat([longer, torch.cat([torch.zeros(1, p, dtype=torch.long), row], 1)], 0)
                am2 = torch.ones_like(ids2)
                am2[1, :p] = 0
                failures: list[FamilyMismatch] = []
                for attn in self.attns:
                    if "manual" in self.modes:
                        failures += self._manual(attn, w, fed, row, torch.ones_like(row), 0)
                    if "padded" in self.modes:
                        failures += self._manual(attn, w, fed, ids2, am2, p)
                    if "generate" in self.modes:
                        failures += self._generate(attn, w, seg, ids2, am2, p)
                    if failures:
                        break
                if failures:
                    raise min(failures, key=lambda e: (e.index, e.padded))
        return stats

    def _columns(self, fed: list[tuple[int, Op]], p: int) -> list[tuple[int, Op]]:
        """The op that feeds each column of a stream with ``p`` pad (or extra) columns before it."""
        cols = [fed[0]] * p
        for i, op in fed:
            cols += [(i, op)] * op.tokens
        return cols

    def _reference(self, fam, attn: str, w: int, ids: torch.Tensor, am: torch.Tensor) -> torch.Tensor:
        try:
            return fam.reference_logits(attn, ids, spec_masks(fam.layer_types(), w, am), am)
        except Exception as e:  # noqa: BLE001 - the reference is harness code, whatever it calls
            raise self.fault(e, f"reference forward ({attn})") from e

    def _compare(self, got: torch.Tensor, ref: torch.Tensor, am: torch.Tensor, check: torch.Tensor,
                 ops: list, tag: str, w: int) -> list[FamilyMismatch]:
        """``got`` against ``ref`` (``[B, C, V]``) where ``check`` (``[B, C]``) says; ``am`` is the batch's
        attention mask, ``ops[c]`` the op column ``c``'s logits belong to. The earliest column that
        disagrees (a NaN does), as a one-element list."""
        err = (got - ref).abs()
        ok = err <= ATOL + RTOL * ref.abs()
        bad = (~ok.all(dim=-1)) & check.bool()
        if not bad.any():
            return []
        col = int(bad.any(dim=0).nonzero()[0])
        b = int(bad[:, col].nonzero()[0])
        i, op = ops[col]
        pos = int(positions(am)[b, col])
        worst = err[b, col].nan_to_num(nan=float("inf")).max().item()
        padded = bool((am[b] == 0).any())
        return [FamilyMismatch(self.name, i, op, f"{tag} logits of row {b}{' (left-padded)' if padded else ''} at "
                                                 f"position {pos} (W={w}) differ from the spec-masked reference "
                                                 f"by {worst:.3g} (tolerance {ATOL:g} + {RTOL:g}*|ref|)",
                               padded=padded)]

    def _manual(self, attn: str, w: int, fed: list[tuple[int, Op]], ids: torch.Tensor, am: torch.Tensor,
                p: int) -> list[FamilyMismatch]:
        padded = ids.shape[0] > 1
        fam = self._family_for(attn, padded)
        tag = f"[{'padded' if padded else 'manual'}/{attn}]"
        chunks = [op.tokens for _, op in fed]
        chunks[0] += p
        cols = self._columns(fed, p)
        try:
            got = fam.run_cached(w, attn, ids, chunks, am if padded else None)
        except Exception as e:  # noqa: BLE001
            j = getattr(e, "chunk", len(fed) - 1)
            i, op = fed[min(j, len(fed) - 1)]
            raise self.raised(i, op, f"{tag} forward of chunk {j} ({chunks[j] if j < len(chunks) else '?'} tokens, "
                                     f"W={w})", e) from e
        ref = self._reference(fam, attn, w, ids, am)
        return self._compare(got, ref, am, am, cols, tag, w)

    def _generate(self, attn: str, w: int, seg: list[tuple[int, Op]], ids2: torch.Tensor, am2: torch.Tensor,
                  p: int) -> list[FamilyMismatch]:
        """Greedy ``generate()`` turns over the padded batch: ``ids2`` holds the stream's user tokens in
        the column order of :meth:`_manual`'s padded batch; generated tokens replace the pushes'."""
        fam = self._family_for(attn, True)
        tag = f"[generate/{attn}]"
        hist = ids2[:, :p]  # the pad / extra columns, then the stream
        mask = am2[:, :p]
        nxt = p  # next user column of ids2
        steps: list[tuple[int, Op, int, torch.Tensor]] = []  # (op index, op, column of the logits, logits [B, V])
        j = 0
        while j < len(seg):
            i, op = seg[j]
            if op.tokens == 0:
                j += 1
                continue
            if isinstance(op, Chunk) or hist.shape[1] == p:
                k = op.tokens
                hist = torch.cat([hist, ids2[:, nxt:nxt + k]], 1)
                mask = torch.cat([mask, am2[:, nxt:nxt + k]], 1)
                nxt += k
                pushes, end = [], j + 1
                while end < len(seg) and (isinstance(seg[end][1], Push) or seg[end][1].tokens == 0):
                    if isinstance(seg[end][1], Push):
                        pushes.append(seg[end])
                    end += 1
                j = end
                g = len(pushes)
                if g == 0:
                    continue
                gi, gop = pushes[-1]
                prompt = hist.shape[1]
                try:
                    seqs, logits = fam.generate(w, attn, hist, g, mask)
                except Exception as e:  # noqa: BLE001
                    raise self.raised(gi, gop, f"{tag} generate(max_new_tokens={g}) after a {prompt}-column "
                                               f"prompt (W={w})", e) from e
                if seqs.shape != (hist.shape[0], prompt + g) or logits.shape[1] != g:
                    raise FamilyMismatch(self.name, gi, gop, f"{tag} generate returned {tuple(seqs.shape)} "
                                                             f"sequences / {tuple(logits.shape)} logits for {g} "
                                                             f"new tokens after {prompt} columns")
                for s_, (si, sop) in enumerate(pushes):
                    steps.append((si, sop, prompt - 1 + s_, logits[:, s_]))
                hist = seqs
                mask = torch.cat([mask, torch.ones(hist.shape[0], g, dtype=mask.dtype)], 1)
                nxt += g  # the pushes' user columns are replaced by the generated tokens
            else:  # pragma: no cover - a push always follows a chunk or starts a stream
                raise AssertionError(f"{tag} push at op #{i} neither starts a prompt nor follows one")
        if not steps:
            return []
        ref = self._reference(fam, attn, w, hist, mask)
        got = torch.zeros_like(ref)
        check = torch.zeros_like(mask)
        ops: list = [None] * hist.shape[1]
        for si, sop, c, lg in steps:
            got[:, c] = lg
            check[:, c] = mask[:, c]
            ops[c] = (si, sop)
        return self._compare(got, ref, mask, check, ops, tag, w)


def probe_case() -> Case:
    """:meth:`impl.hf.families.Family._try`'s stream as a case: ``W = PROBE_WINDOW``, a chunk for the prefill, a
    push per decode step (each op is one call on the cache: :meth:`HFFamilyTarget._manual`)."""
    first, *rest = families.PROBE_CALLS
    return Case(families.PROBE_WINDOW, (Chunk(first), *(Push() if n == 1 else Chunk(n) for n in rest)))


def parse_spec(rest: str, *, prefix: str = "hf", allowed: Sequence[str] = families.CPU_ATTENTION,
               what: str = "attention implementations") -> tuple[str, Optional[list[str]]]:
    """``"mistral"`` -> ``("mistral", None)``; ``"gemma2@eager,sdpa"`` -> ``("gemma2", ["eager", "sdpa"])``: the
    model type of ``<prefix>:<rest>`` (one of :data:`impl.hf.families.FAMILIES`) and the ``allowed``
    implementations it names, or :class:`TargetError` saying which are allowed."""
    model_type, _, attns = rest.partition("@")
    if not model_type:
        raise TargetError(f"{prefix}: needs a model type, e.g. {prefix}:mistral "
                          "(kvwindow fuzz --list-targets lists them)")
    names = [a for a in attns.split(",") if a] if attns else None
    if attns and (not names or any(a not in allowed for a in names)):
        raise TargetError(f"{prefix}:{rest}: {what} are {', '.join(allowed)}, got {attns!r}")
    if model_type not in families.FAMILIES:
        raise TargetError(f"unknown family {prefix}:{model_type}; known: "
                          + ", ".join(f"{prefix}:{mt}" for mt in families.FAMILIES))
    return model_type, names


def make_hf_family(rest: str) -> Target:
    """``hf:<model_type>[@attn,...]``: probe the family (:func:`impl.hf.families.probe`), then build it."""
    model_type, attns = parse_spec(rest)
    _hf()
    why = families.available()[model_type]
    if why is not None:
        raise compat.HFUnavailable(why)
    probed(families.probe, model_type)
    with torch_threads(1):  # trying each attention implementation runs the model
        return HFFamilyTarget(model_type, attns=attns)


def instances() -> list[str]:
    """Every ``hf:<model_type>`` the registry lists (available here or not): one per family."""
    return [f"hf:{mt}" for mt in families.FAMILIES]
