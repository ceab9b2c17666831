"""Does flex attention's CPU kernel die only on a sliding window (a crash finding, DESIGN §4) or on any model
(the target is unavailable)? The question ``impl.hf.families.Family.attn_impls`` asks of ``hf:<type>@flex_attention``.

    python scripts/repro/hf_flex_attention_cpu.py     # exit 1: dies with the window only; 0: otherwise

A tiny random Mistral (seeded, nothing downloaded), float32 (flex attention's CPU kernel takes float32). Each run is
a fresh child process with its own inductor cache (``TORCHINDUCTOR_CACHE_DIR``), so no compiled kernel is shared:

- ``cached W=3 / W=64 / None``: a prefill of 4 tokens then one decode token through the model's own cache, with
  ``sliding_window=3``, ``64`` (longer than the stream: the harness's "without the window") and ``None``;
- ``reference additive / BlockMask``: no window, 10 tokens at once, the decoder layer handed the causal mask as a
  dense additive float tensor (what the harness's reference gives eager and sdpa) or as a flex ``BlockMask``.

Measured (issue 27) on transformers 5.24.0 and 5.25.0, torch 2.13.0+cpu, gcc, the shared 2-core machine at load ~1:
``cached W=3`` dies at the decode step (``InductorError: CppCompileError``: the C++ that inductor's CPU flex
template generates for the sliding mask reads ``cur_kvSplitSize0``, a name it never declares), ``cached W=64`` and
``None`` run, ``reference additive`` kills the process (heap corruption, no window involved: signal 6 with
``free(): invalid next size`` or ``double free or corruption``, or signal 11; pytorch/pytorch#153145) and ``reference BlockMask`` runs. So the compile crash is the window's,
and the harness's reference hands flex attention a ``BlockMask`` (``impl.hf.families._block_mask``). An earlier
measurement here (load 13-19, several processes compiling into one shared inductor cache) saw W=64 and None die at
the prefill too; with a private cache and nothing beside it they do not. Each run costs 10-25 s (compiling).

The crash depends on what the process compiled before: transformers compiles ``flex_attention`` once per process,
the decode step's new shapes make dynamo recompile it with a dynamic kv length, and it is that recompile whose C++
fails. A process whose first flex call was another case (a W = 1 stream) compiled the dynamic kernel from a prefill
and runs W = 3 afterwards (docs/findings/hf-flex-attention-sliding-compile.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings

RUNS = ("cached W=3", "cached W=64", "cached None", "reference additive", "reference BlockMask")


def one(run: str) -> str:
    """Do ``run`` in this process; ``"runs"`` or ``"died at <step>: <exception>"``."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    kind, arg = run.split()
    window = None if arg in ("None", "additive", "BlockMask") else int(arg.removeprefix("W="))
    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=64,
                        sliding_window=window, attn_implementation="flex_attention")
    model = MistralForCausalLM(cfg).to(torch.float32).eval()
    step = "the prefill (4 tokens)"
    try:
        with torch.no_grad():
            if kind == "cached":
                ids = torch.arange(3, 8).view(1, 5)
                out = model(input_ids=ids[:, :4], use_cache=True)
                cache = getattr(out, "past_key_values", None) or getattr(out, "cache", None)
                step = "the decode step on the cache"
                model(input_ids=ids[:, 4:], use_cache=True, past_key_values=cache)
            else:
                step = "the full forward (10 tokens)"
                causal = torch.ones(1, 1, 10, 10, dtype=torch.bool).tril()
                if arg == "additive":
                    mask = torch.zeros(causal.shape).masked_fill(~causal, torch.finfo(torch.float32).min / 2)
                else:
                    from torch.nn.attention.flex_attention import create_block_mask
                    mask = create_block_mask(lambda b, h, q, kv: causal[b, 0, q, kv], 1, None, 10, 10, device="cpu")
                model.model.layers[0].register_forward_pre_hook(
                    lambda m, a, kw: (a, {**kw, "attention_mask": mask}), with_kwargs=True)
                model(input_ids=torch.arange(3, 13).view(1, 10), use_cache=False)
    except Exception as e:  # noqa: BLE001 - the death is the result
        lines = [ln for ln in str(e).splitlines() if "error:" in ln][:1] or str(e).splitlines()[:1] or [""]
        return f"died at {step}: {type(e).__name__}: {lines[0].strip().rsplit('/', 1)[-1]}"[:300]
    return "runs"


def child(run: str) -> str:
    """``run`` in a fresh process with a private inductor cache; how it ended, signals included."""
    with tempfile.TemporaryDirectory(prefix="kvw-flex-") as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
        r = subprocess.run([sys.executable, __file__, "--one", run], env=env, capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip():
        return r.stdout.strip().splitlines()[-1]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith((" ", "Fatal", "Current", "Thread",
                                                                                     "Extension"))]
    how = f"signal {-r.returncode}" if r.returncode < 0 else f"exit status {r.returncode}"
    return f"died ({how}): {(lines or ['(no output)'])[-1][:200]}"


def main() -> int:
    if sys.argv[1:2] == ["--one"]:
        warnings.simplefilter("ignore")
        print(one(sys.argv[2]))
        return 0
    import torch
    import transformers

    print(f"transformers {transformers.__version__}, torch {torch.__version__}", flush=True)
    got = {}
    for run in RUNS:
        got[run] = child(run)
        print(f"{run:20s} {got[run]}", flush=True)
    reproduced = got["cached W=3"] != "runs" and got["cached W=64"] == "runs" and got["cached None"] == "runs"
    print("reproduced: dies with the window only" if reproduced else "not reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
