"""Tiny random-weight Mistral / Gemma 2 models, driven the way users drive them, held to the reference.

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
  ``Chunk(n)`` appends ``n`` user tokens, a run of ``Push`` ops after them is
  that many generated tokens (one ``generate(max_new_tokens=g)`` call that
  continues on the same cache, multi-turn style); ``output_logits`` gives the
  logits of every generated step. A stream's first ``Push`` with nothing before it
  is a one-token prompt; a trailing chunk with nothing generated after it is
  a manual forward on the same cache.

``Reset(w)`` builds the model again from the same weights with
``sliding_window = w`` and starts a new cache.

Every logit row any call returns is compared with :func:`impl.hf.reference.forward`
over the stream's full history, and after every op each sliding layer's stored
keys are compared with the reference keys at the positions the pinned cache
convention names (:mod:`impl.hf.conventions`).

Tolerance: ``|hf - ref| <= ATOL + RTOL * |ref|`` with ``ATOL = RTOL = 1e-4``.
The models run in float64, but transformers computes RMSNorm, RoPE and the
eager softmax in float32 (e.g. 5.24.0 modeling_mistral.py lines 192-197,
modeling_gemma2.py ``_norm(x.float())``), so agreement is at float32 rounding
(observed max error ~1e-6 on logits of magnitude ~10); a window off by one
moves logits by 1e-2 .. 1 with these weights (see ``tests/test_hf_models.py``).
"""

from __future__ import annotations

import hashlib
import warnings
from typing import Any, Optional, Sequence

import numpy as np
import torch

from fuzz.ops import Chunk, Op, Push, Reset, SpecStream
from fuzz.targets import Mismatch, RunStats, Target
from impl.hf import compat, conventions, reference

ATOL = 1e-4
RTOL = 1e-4
VOCAB = 64


def tiny_config(arch: str, window: int, attn: str) -> Any:
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512,
                  sliding_window=window, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    if arch == "mistral":
        from transformers import MistralConfig

        cfg = MistralConfig(**common)
    else:
        from transformers import Gemma2Config

        cfg = Gemma2Config(**common, query_pre_attn_scalar=8, attn_logit_softcapping=50.0,
                           final_logit_softcapping=30.0)
    cfg._attn_implementation = attn
    return cfg


def random_state_dict(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Weights large enough that which keys a query sees matters (HF's std 0.02 init makes
    attention nearly uniform and logits tiny): projections ~ N(0, 1/fan_in), q/k x2,
    embeddings ~ N(0, 1), norm weights near their identity value."""
    gen = torch.Generator().manual_seed(seed)
    sd = {}
    for name, p in model.state_dict().items():
        if name.endswith("norm.weight"):
            base = 0.0 if "gemma" in type(model).__name__.lower() else 1.0
            t = base + 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64)
        elif "embed_tokens" in name:
            t = torch.randn(p.shape, generator=gen, dtype=torch.float64)
        elif p.dim() == 2:
            gain = 2.0 if ("q_proj" in name or "k_proj" in name) else 1.0
            t = gain * torch.randn(p.shape, generator=gen, dtype=torch.float64) / p.shape[1] ** 0.5
        else:
            t = p.detach().clone().to(torch.float64)
        sd[name] = t
    return sd


def _model_class(arch: str):
    if arch == "mistral":
        from transformers import MistralForCausalLM

        return MistralForCausalLM
    from transformers import Gemma2ForCausalLM

    return Gemma2ForCausalLM


def attn_impls(arch: str) -> list[str]:
    """Gemma 2 on 5.x declares ``_supports_sdpa = False`` (5.24.0 modeling_gemma2.py, the
    ``Gemma2PreTrainedModel`` class attributes); 4.45 has an sdpa class that skips soft-capping."""
    cls = _model_class(arch)
    return ["eager", "sdpa"] if getattr(cls, "_supports_sdpa", True) else ["eager"]


def _case_seed(window: int, ops: Sequence[Op]) -> int:
    from fuzz.ops import format_ops

    return int.from_bytes(hashlib.sha256(f"{window}|{format_ops(ops)}".encode()).digest()[:4], "little")


class HFModelTarget(Target):
    kind = "model"
    max_window = 16
    max_tokens = 40

    def __init__(self, arch: str, *, strict: bool = False, window_shift: int = 0, name: Optional[str] = None,
                 modes: Sequence[str] = ("manual", "generate"), attns: Optional[Sequence[str]] = None,
                 seed: int = 0):
        self.info = compat.info()
        self.arch, self.strict, self.window_shift = arch, strict, window_shift
        self.name = name or f"hf-{arch}"
        self.modes = tuple(modes)
        self.attns = tuple(attns) if attns is not None else tuple(attn_impls(arch))
        torch.manual_seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            proto = _model_class(arch)(tiny_config(arch, 4, "eager"))
        self.state = random_state_dict(proto, seed)
        if getattr(proto.config, "tie_word_embeddings", False):
            self.state["lm_head.weight"] = self.state["model.embed_tokens.weight"]
        self._models: dict[tuple[int, str], Any] = {}

    def versions(self) -> dict[str, str]:
        return self.info.versions()

    def accepts(self, window: int, ops: Sequence[Op]) -> Optional[str]:
        why = super().accepts(window, ops)
        if why is None and not self.strict:
            from fuzz.hf_targets import _known_reason

            why = _known_reason(self.arch, self.info.api, window, ops)
        return why

    # -- models and caches

    def model(self, window: int, attn: str):
        key = (window, attn)
        if key not in self._models:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cfg = tiny_config(self.arch, window + self.window_shift, attn)
                m = _model_class(self.arch)(cfg).to(torch.float64)
                m.load_state_dict(self.state, strict=False)
                if hasattr(m, "tie_weights"):
                    m.tie_weights()
                m.eval()
                gc = m.generation_config
                gc.eos_token_id, gc.pad_token_id, gc.do_sample = None, 0, False
                if self.info.api == "legacy" and getattr(gc, "cache_implementation", None) is not None:
                    # 4.45 Gemma 2 defaults to cache_implementation="hybrid" (a HybridCache sized to one
                    # generate call) and refuses a passed cache alongside it; multi-turn users pass their
                    # own HybridCache, so the adapter does that (sized to the stream, see _new_cache).
                    gc.cache_implementation = None
                for attr in ("temperature", "top_p", "top_k"):
                    if hasattr(gc, attr):
                        setattr(gc, attr, None)
            self._models[key] = m
        return self._models[key]

    def _new_cache(self, model, total: int):
        """``None`` (let the model create its default) except where 4.45 users must build one."""
        if self.info.api == "layers":
            return None
        from transformers import cache_utils as cu

        if self.arch == "mistral":
            return cu.DynamicCache()
        # max_cache_len >= W so the sliding buffer has W slots (it has min(W, max_cache_len)).
        size = max(total + 1, model.config.sliding_window)
        return cu.HybridCache(model.config, batch_size=1, max_cache_len=size, device="cpu", dtype=torch.float64)

    def _call(self, model, ids: list[int], cache, start: int):
        kw: dict[str, Any] = {"input_ids": torch.tensor([ids], dtype=torch.long), "use_cache": True}
        if cache is not None:
            kw[self.info.cache_kwarg] = cache
        if self.info.takes_cache_position:
            kw["cache_position"] = torch.arange(start, start + len(ids))
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = model(**kw)
        new_cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        return out.logits[0].to(torch.float64), new_cache

    def _generate(self, model, history: list[int], cache, g: int):
        ids = torch.tensor([history], dtype=torch.long)
        kw: dict[str, Any] = dict(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=g,
                                  min_new_tokens=g, do_sample=False, output_logits=True,
                                  return_dict_in_generate=True)
        if cache is not None:
            kw["past_key_values"] = cache
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = model.generate(**kw)
        new = out.sequences[0, len(history):].tolist()
        logits = torch.cat([l.to(torch.float64) for l in out.logits], dim=0)
        return new, logits, out.past_key_values

    def _stored_keys(self, cache) -> dict[int, torch.Tensor]:
        """Sliding layers' stored keys ``[KVH, rows, D]`` by layer index."""
        out = {}
        if cache is None:
            return out
        if self.info.api == "layers":
            for i, layer in enumerate(cache.layers):
                if getattr(layer, "is_sliding", False):
                    ks = layer.keys if layer.is_initialized and layer.keys is not None else None
                    out[i] = None if ks is None else ks[0].detach().clone()
        elif self.arch == "gemma2":
            out[0] = cache.key_cache[0][0].detach().clone()
        return out

    def _convention(self, n: int, window: int) -> Optional[list]:
        if self.info.api == "layers":
            return conventions.dynamic_layer(n, 0, window)[1]
        if self.arch == "gemma2":
            return conventions.legacy_static(n, 0, window)[1]
        return None

    # -- running a case

    def run(self, window: int, ops: Sequence[Op]) -> RunStats:
        if not self.strict:
            from fuzz.hf_targets import _skip_known

            _skip_known(self, self.arch, self.info.api, window, ops)
        stats = RunStats()
        spec = SpecStream(window, 1)
        for op in ops:
            stats.phases |= spec.apply(op)
            stats.steps += 0 if isinstance(op, Reset) else (1 if isinstance(op, Push) else op.n)
        base = _case_seed(window, ops)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # tiny matrices: one thread is ~10x faster than contending ones
        try:
            for mode in self.modes:
                for attn in self.attns:
                    self._run_mode(mode, attn, window, ops, base)
        finally:
            torch.set_num_threads(threads)
        return stats

    def _segments(self, window: int, ops: Sequence[Op]):
        """``[(window, [(op_index, op), ...]), ...]`` split at resets."""
        segs = [(window, [])]
        for i, op in enumerate(ops):
            if isinstance(op, Reset):
                segs.append((op.window, []))
            else:
                segs[-1][1].append((i, op))
        return segs

    def _run_mode(self, mode: str, attn: str, window: int, ops: Sequence[Op], base: int) -> None:
        for epoch, (w, seg) in enumerate(self._segments(window, ops)):
            total = sum(1 if isinstance(op, Push) else op.n for _, op in seg)
            if total == 0:
                continue
            rng = np.random.default_rng([base, epoch])
            model = self.model(w, attn)
            history: list[int] = []
            steps: list[tuple[int, Op, list[int], torch.Tensor]] = []  # (op index, op, positions, logits)
            snaps: list[tuple[int, Op, int, dict]] = []  # (op index, op, tokens fed, stored keys)
            cache = self._new_cache(model, total)
            fed = 0
            tag = f"[{mode}/{attn}]"

            def forward(ids_new: list[int], i: int, op: Op):
                nonlocal cache, fed
                start = fed
                try:
                    logits, cache2 = self._call(model, history[fed:], cache, fed)
                except Exception as e:  # noqa: BLE001
                    raise Mismatch(self.name, i, op, f"{tag} forward of {len(history) - fed} tokens at position "
                                                     f"{fed} (W={w}) raised {type(e).__name__}: {e}") from e
                cache = cache2 if cache is None else cache
                positions = list(range(start, len(history)))
                steps.append((i, op, positions, logits[-len(positions):]))
                fed = len(history)
                snaps.append((i, op, fed, self._stored_keys(cache)))

            if mode == "manual":
                for i, op in seg:
                    k = 1 if isinstance(op, Push) else op.n
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
                        k = 1 if isinstance(op, Push) else op.n
                        history.extend(int(t) for t in rng.integers(3, VOCAB, size=k))
                        g = 0
                        while j + 1 + g < len(seg) and isinstance(seg[j + 1 + g][1], Push):
                            g += 1
                        if g == 0:
                            forward(history, i, op)
                            j += 1
                            continue
                        gi, gop = seg[j + g]
                        prompt_len = len(history)
                        try:
                            new, logits, cache2 = self._generate(model, history, cache, g)
                        except Exception as e:  # noqa: BLE001
                            raise Mismatch(self.name, gi, gop, f"{tag} generate(max_new_tokens={g}) after a "
                                                               f"{prompt_len}-token prompt (W={w}) raised "
                                                               f"{type(e).__name__}: {e}") from e
                        cache = cache2
                        if len(new) != g:
                            raise Mismatch(self.name, gi, gop, f"{tag} generate returned {len(new)} tokens, "
                                                               f"asked for {g}")
                        history.extend(new)
                        fed = len(history) - 1  # the last generated token is not fed back yet
                        for s in range(g):
                            si, sop = seg[j + 1 + s]
                            steps.append((si, sop, [prompt_len - 1 + s], logits[s:s + 1]))
                        snaps.append((gi, gop, fed, self._stored_keys(cache)))
                        j += 1 + g
                    else:  # unreachable: pushes are consumed with their prompt
                        j += 1
            self._check(w, history, steps, snaps, tag, attn)

    def _check(self, w: int, history: list[int], steps, snaps, tag: str, attn: str) -> None:
        spec = reference.ref_spec(self.arch, self._models[next(iter(self._models))].config, w)
        if self.arch == "gemma2" and attn == "sdpa" and self.info.api == "legacy":
            # 4.45.2 Gemma2SdpaAttention (modeling_gemma2.py lines 389-470) never applies
            # attn_logit_softcapping (only eager, lines 244-247, and flash-attn >= 2.6 do); its
            # docs say so (line 681). That is its documented convention, so the reference drops it too.
            spec.attn_softcap = None
        ref_logits, ref_keys = reference.forward(spec, self.state, history)
        events = [(i, 0, op, ("logits", pos, lg)) for i, op, pos, lg in steps]
        events += [(i, 1, op, ("keys", fed, ks)) for i, op, fed, ks in snaps]
        for i, _, op, ev in sorted(events, key=lambda e: (e[0], e[1])):
            if ev[0] == "logits":
                _, pos, lg = ev
                ref = ref_logits[pos]
                if lg.shape != ref.shape:
                    raise Mismatch(self.name, i, op, f"{tag} logits shape {tuple(lg.shape)} != {tuple(ref.shape)}")
                err = (lg - ref).abs()
                bad = err > ATOL + RTOL * ref.abs()
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
                    rows = [p for p in want]
                    if got is None:
                        if any(p is not None for p in rows):
                            raise Mismatch(self.name, i, op, f"{tag} layer {layer} stores nothing after {fed} "
                                                             f"tokens; convention says positions {rows}")
                        continue
                    if got.shape[1] != len(rows):
                        raise Mismatch(self.name, i, op, f"{tag} layer {layer} stores {got.shape[1]} rows after "
                                                         f"{fed} tokens (W={w}); convention says positions {rows}")
                    for r, p in enumerate(rows):
                        ref = torch.zeros_like(got[:, r]) if p is None else ref_keys[layer][:, p]
                        if not torch.allclose(got[:, r], ref, atol=ATOL, rtol=RTOL):
                            raise Mismatch(self.name, i, op,
                                           f"{tag} layer {layer} row {r} after {fed} tokens (W={w}) is not the "
                                           f"reference key of position {p} (convention: positions {rows})")


def make_target(arch: str, **kw: Any) -> Target:
    return HFModelTarget(arch, **kw)
