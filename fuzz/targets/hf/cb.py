"""``hf-cb:<model_type>``: transformers' continuous batching (:mod:`impl.hf.cb`) as a cache under test — several
concurrent requests of different lengths through one ``ContinuousBatchingManager``, their prefills split by
``max_batch_tokens``, each request held to the spec reference for that request alone.

How a case becomes requests, per stream of the case (``Reset(w)`` starts one with window ``w``; tokens and the
manager's sizes are drawn from a seed of the case, so a seed replays identically):

* every ``Chunk(n)`` (``n > 0``) is a new request with an ``n``-token prompt; a ``Push`` with no request open is
  a one-token prompt; the ``Push`` ops after a request's prompt are its decode steps: ``max_new_tokens`` is
  ``1 + pushes``, so generated token 0 checks the prompt's last position (the chunk op) and token ``k + 1`` the
  position push ``k`` fed (generated token ``k``); ``chunk:0`` feeds nothing;
* all of a stream's requests are added before the manager's loop starts, so they are scheduled concurrently;
  ``max_batch_tokens`` (:data:`BATCH_TOKENS`) splits prefills into chunks (chunked prefill), mixed with other
  requests' decode steps; ``page_size`` (:data:`PAGES`) sets the pages of the paged cache;
* each attention implementation (``sdpa``, ``paged|eager``; ``paged|eager`` only where the family's class declares
  no sdpa: Gemma 2 and gpt-oss on 5.x) runs the stream once.

What is compared, per request: the API's own outputs — ``generated_tokens`` and their ``logprobs`` (logits are
not exposed). The reference is :meth:`impl.hf.families.Family.reference_logits` over the request's prompt and
generated tokens alone (same weights, window disabled, every layer attending through
:func:`fuzz.targets.hf.family.spec_masks`: ``pyspec.in_window`` for sliding layers, causal for full ones), with
the same attention implementation (eager for ``paged|eager``; like with like, Gemma 2's reference for
``paged|eager`` drops attention soft-capping as ``paged|eager`` does: :meth:`impl.hf.cb.CBFamily.reference_family`).
A generated token's log-probability must match
the reference's log-softmax at that token (``|got - ref| <= ATOL + RTOL * |ref|``), and the token must be the
reference's greedy choice (its reference log-probability within that tolerance of the maximum).

It is a paged cache too: after every scheduling step the block tables of every allocator are read
(:class:`impl.hf.cb.Snapshot`) and audited as the paged checker does (docs/paged.md), restated for what the
tables show (no key contents: those are in the logprobs): no table names one block twice and no two requests
share one (block sharing is off); a sliding request holds the blocks of the ``min(n, W)`` ring slots it
needs and at most ``pyspec.paged.max_blocks(W, B)`` (more is an
:class:`~fuzz.paged.checks.OverBound` efficiency finding); a full-attention request the blocks of its ``n``
tokens; every table is released once every request has finished.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
import torch

import pyspec
from pyspec.paged import max_blocks
from fuzz.ops import Case, Chunk, Op, Push
from fuzz.paged.checks import OverBound
from fuzz.targets.base import Mismatch, RunStats, Target
from fuzz.targets.hf.base import HFTarget, _hf, case_stats, probed
from fuzz.targets.hf.family import _case_seed, parse_spec, spec_masks
from impl.decoder import torch_threads
from impl.hf import cb, compat, families
from impl.hf.families import ATOL, RTOL, VOCAB

#: ``max_batch_tokens`` drawn per stream: 1 makes every prefill a run of one-token chunks; small values split
#: prefills and interleave them with other requests' decode steps.
BATCH_TOKENS = (1, 2, 3, 4, 5, 8, 16)
#: ``page_size`` drawn per stream (the release's minimum is 4).
PAGES = (4, 8, 16)


class CBRequest:
    """One request of a stream: its prompt ops and decode ops (``(op index, op)``)."""

    def __init__(self, first: tuple[int, Op]):
        self.prompt_op = first
        self.pushes: list[tuple[int, Op]] = []

    @property
    def prompt_len(self) -> int:
        return self.prompt_op[1].tokens

    @property
    def max_new(self) -> int:
        return 1 + len(self.pushes)

    def op_at(self, pos: int) -> tuple[int, Op]:
        """The op that fed position ``pos`` of the request (prompt positions: the chunk; ``len + k``: push ``k``)."""
        k = pos - self.prompt_len
        return self.prompt_op if k < 0 or not self.pushes else self.pushes[min(k, len(self.pushes) - 1)]

    def op_of_token(self, s: int) -> tuple[int, Op]:
        """The op whose logits generated token ``s`` comes from."""
        return self.prompt_op if s == 0 else self.pushes[s - 1]


def requests_of(seg: Sequence[tuple[int, Op]]) -> list[CBRequest]:
    """The requests of one stream (module docstring)."""
    out: list[CBRequest] = []
    open_ = False
    for i, op in seg:
        if isinstance(op, Chunk):
            if op.n > 0:
                out.append(CBRequest((i, op)))
                open_ = True
        elif isinstance(op, Push):
            if open_:
                out[-1].pushes.append((i, op))
            else:
                out.append(CBRequest((i, op)))
                open_ = True
    return out


def layout(case: Case, epoch: int) -> tuple[int, int]:
    """``(max_batch_tokens, page_size)`` of stream ``epoch`` of ``case``, from its seed."""
    rng = np.random.default_rng([_case_seed(case), epoch, 7])
    return int(rng.choice(BATCH_TOKENS)), int(rng.choice(PAGES))


class HFCBTarget(HFTarget):
    kind = "model"
    window_max = 16
    max_tokens = 24

    def __init__(self, model_type: str, *, attns: Optional[Sequence[str]] = None, strict: bool = False,
                 window_shift: int = 0, seed: int = 0, name: Optional[str] = None):
        self.cb = cb.CBFamily(model_type, seed=seed, window_shift=window_shift)
        self.family = self.cb.family
        self.info = self.family.info
        self.model_type, self.strict = model_type, strict
        self.finding_kind = f"hf-cb:{model_type}"
        self.name = name or f"hf-cb:{model_type}" + (f"@{','.join(attns)}" if attns else "")
        offered = self.cb.attn_impls()
        if attns:
            missing = [a for a in attns if a not in offered]
            if missing:
                why = "; ".join(f"{a}: {self.cb.attn_unavailable(a)}" for a in missing)
                raise compat.HFUnavailable(f"{self.name}: transformers {self.info.transformers} does not run {why}")
        self.attns = tuple(attns) if attns else tuple(offered)

    def tolerances(self) -> dict[str, dict[str, float]]:
        return {"logprobs": {"atol": ATOL, "rtol": RTOL}}

    def versions(self) -> dict[str, str]:
        return dict(super().versions(), attention=",".join(self.attns),
                    tolerance=f"|logprob - ref| <= {ATOL:g} + {RTOL:g} * |ref|")

    def run_case(self, case: Case) -> RunStats:
        stats = case_stats(case)
        base = _case_seed(case)
        with torch_threads(1):
            for epoch, (w, seg) in enumerate(case.streams()):
                reqs = requests_of(seg)
                if not reqs:
                    continue
                rng = np.random.default_rng([base, epoch])
                prompts = [[int(x) for x in rng.integers(3, VOCAB, size=r.prompt_len)] for r in reqs]
                mbt, page = layout(case, epoch)
                failures: list[Mismatch] = []
                for attn in self.attns:
                    failures += self._stream(attn, w, reqs, prompts, mbt, page)
                    if failures:
                        break
                if failures:
                    raise min(failures, key=lambda e: e.index)
        return stats

    def _stream(self, attn: str, w: int, reqs: list[CBRequest], prompts: list[list[int]], mbt: int,
                page: int) -> list[Mismatch]:
        tag = f"[cb/{attn} max_batch_tokens={mbt} page_size={page}]"
        try:
            res = self.cb.run(w, attn, [cb.Request(p, r.max_new) for p, r in zip(prompts, reqs)],
                              max_batch_tokens=mbt, page_size=page)
        except Exception as e:  # noqa: BLE001
            i, op = reqs[0].prompt_op
            raise self.raised(i, op, f"{tag} continuous batching of {len(reqs)} requests (W={w})", e) from e
        if res.reader_error is not None:
            raise self.fault(RuntimeError(res.reader_error), f"{tag} reading the block tables")
        out: list[Mismatch] = []
        for r, (req, p, o) in enumerate(zip(reqs, prompts, res.outputs)):
            out += self._request(attn, w, tag, r, req, p, o)
        out += self._audit(w, tag, reqs, res)
        return out

    def _request(self, attn: str, w: int, tag: str, r: int, req: CBRequest, prompt: list[int],
                 o: cb.Output) -> list[Mismatch]:
        if o.error is not None:
            i, op = req.prompt_op
            return [Mismatch(self.name, i, op, f"{tag} request {r} ({len(prompt)}-token prompt, W={w}) failed inside "
                                               f"the continuous batching loop: {o.error}")]
        if len(o.tokens) != req.max_new or len(o.logprobs) != req.max_new:
            i, op = req.op_of_token(min(len(o.tokens), req.max_new - 1))
            return [Mismatch(self.name, i, op, f"{tag} request {r} returned {len(o.tokens)} tokens / "
                                               f"{len(o.logprobs)} logprobs for max_new_tokens={req.max_new}")]
        seq = torch.tensor([prompt + o.tokens[:-1]], dtype=torch.long)
        am = torch.ones_like(seq)
        fam = self.cb.reference_family(attn)
        base_attn = cb.CB_ATTENTION[attn]
        try:
            ref = fam.reference_logits(base_attn, seq, spec_masks(fam.layer_types(), w, am), am)[0]
        except Exception as e:  # noqa: BLE001 - the reference is harness code
            raise self.fault(e, f"reference forward ({base_attn})") from e
        lp = torch.log_softmax(ref, dim=-1)
        for s, (tok, got) in enumerate(zip(o.tokens, o.logprobs)):
            c = len(prompt) - 1 + s
            want = float(lp[c, tok])
            tol = ATOL + RTOL * abs(want)
            best = float(lp[c].max())
            why = None
            if not abs(got - want) <= tol:
                why = f"log-probability {got:.6g} of its token {tok}; the reference gives {want:.6g}"
            elif want < best - tol:
                why = (f"token {tok} (reference log-probability {want:.6g}); the reference's greedy token is "
                       f"{int(lp[c].argmax())} ({best:.6g})")
            if why is not None:
                i, op = req.op_of_token(s)
                return [Mismatch(self.name, i, op, f"{tag} request {r} ({len(prompt)}-token prompt) generated token "
                                                   f"{s} at position {c} (W={w}): {why} (spec-masked reference, "
                                                   f"tolerance {ATOL:g} + {RTOL:g}*|ref|)")]
        return []

    def _audit(self, w: int, tag: str, reqs: list[CBRequest], res: cb.Result) -> list[Mismatch]:
        """The paged audits of the block tables (module docstring); the first failure by op index."""
        out: list[Mismatch] = []

        def fail(r: int, pos: int, detail: str, cls: type = Mismatch) -> None:
            i, op = reqs[r].op_at(max(pos, 0)) if 0 <= r < len(reqs) else reqs[0].prompt_op
            out.append(cls(self.name, i, op, f"{tag} {detail}"))

        for snap in res.snapshots:
            for group, tables in snap.tables.items():
                B = snap.page[group]
                owner: dict[int, int] = {}
                for r, tbl in tables.items():
                    n = snap.length_after.get(r)
                    pos = (n - 1) if n else 0
                    if len(set(tbl)) != len(tbl):
                        fail(r, pos, f"step {snap.step}: {group} table of request {r} names a block twice: {tbl}")
                    for b in tbl:
                        if b in owner and owner[b] != r:
                            fail(r, pos, f"step {snap.step}: {group} block {b} is in the tables of requests "
                                         f"{owner[b]} and {r} (block sharing is off)")
                        owner.setdefault(b, r)
                    if n is None:
                        continue  # not scheduled this step: its length is not read here
                    if group.startswith("sliding_attention"):
                        need = math.ceil(min(n, w) / B)
                        bound = max_blocks(w, B)
                        if len(tbl) > bound:
                            fail(r, pos, f"step {snap.step}: request {r} at length {n} holds {len(tbl)} sliding blocks "
                                         f"of {B} tokens, more than ceil((W-1)/B)+1 = {bound} (W={w})", OverBound)
                    else:
                        need = math.ceil(n / B)
                    if len(tbl) < need:
                        fail(r, pos, f"step {snap.step}: request {r} at length {n} holds {len(tbl)} {group} blocks "
                                     f"of {B} tokens, fewer than the {need} its needed positions occupy (W={w})")
        for group, tables in res.final_tables.items():
            if tables:
                r = min(tables)
                fail(r, reqs[r].prompt_len + reqs[r].max_new - 1 if 0 <= r < len(reqs) else 0,
                     f"after every request finished, {group} tables are still held: {tables}")
        return [min(out, key=lambda e: e.index)] if out else []


def make_hf_cb(rest: str) -> Target:
    """``hf-cb:<model_type>[@sdpa|paged|eager]``: probe continuous batching on the family, then build it."""
    model_type, attns = parse_spec(rest, prefix="hf-cb", allowed=cb.CB_ATTENTION,
                                   what="continuous batching's CPU attention implementations")
    _hf()
    why = families.available()[model_type] or cb.available()
    if why is not None:
        raise compat.HFUnavailable(why)
    probed(cb.probe, model_type)
    with torch_threads(1):
        return HFCBTarget(model_type, attns=attns)


#: What a default campaign lists (see :func:`instances`).
DEFAULT = ("mistral",)


def instances() -> list[str]:
    """What a default campaign lists: ``hf-cb:mistral`` only. The other families run when named; each listed
    target is probed and built (both attention implementations, ~1 s) and takes its share of a default
    campaign's time, and continuous batching's window code is shared by every family (the allocator and
    ``build_attention_mask`` see only ``sliding_window`` and ``layer_types``)."""
    return [f"hf-cb:{mt}" for mt in DEFAULT]
