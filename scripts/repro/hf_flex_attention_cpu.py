"""Does flex attention's CPU kernel die only on a sliding window (a crash finding, DESIGN §4) or on any model
(the target is unavailable)? The question ``impl.hf.families.Family.attn_impls`` asks of ``hf:<type>@flex_attention``.

    python scripts/repro/hf_flex_attention_cpu.py     # exit 1: dies with the window only; 0: otherwise

A tiny random Mistral (seeded, nothing downloaded), float32 (flex attention's CPU kernel takes float32), a prefill
of 4 tokens then one decode token through the model's own cache, with ``sliding_window=3``, ``64`` (longer than the
stream: the harness's "without the window", ``ignore_window``) and ``None``. Prints one line per run.

Measured (issue 27) on transformers 5.24.0, torch 2.13.0+cpu, the shared 2-core machine: W=3 dies at the decode
step, W=64 and None die at the prefill, all with ``InductorError: CppCompileError: C++ compile error`` — not a
window finding. The harness's own probe children (``Family('mistral')._try('flex_attention')``) died the same way
with the window (337 s wall at load 13) and aborted without it (``malloc(): unaligned tcache chunk detected``,
signal 6), so ``hf:mistral@flex_attention`` stays unavailable, naming both deaths.
"""

from __future__ import annotations

import inspect
import sys
import warnings


def run(window: int | None) -> str | None:
    """``None`` if prefill + one cached decode step runs, else the exception's first line."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=64,
                        sliding_window=window, attn_implementation="flex_attention")
    model = MistralForCausalLM(cfg).to(torch.float32).eval()
    ids = torch.arange(3, 8).view(1, 5)
    kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"  # 5.x: cache=
    step = "the prefill (4 tokens)"
    try:
        with torch.no_grad():
            out = model(input_ids=ids[:, :4], use_cache=True)
            cache = getattr(out, "past_key_values", None) or getattr(out, "cache", None)
            step = "the decode step on the cache"
            model(input_ids=ids[:, 4:], use_cache=True, **{kw: cache})
    except Exception as e:  # noqa: BLE001 - the death is the result
        return f"{step}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    return None


def main() -> int:
    warnings.simplefilter("ignore")
    import torch
    import transformers

    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    windowed, longer, plain = run(3), run(64), run(None)
    print(f"sliding_window=3:    {'runs' if windowed is None else 'died: ' + windowed}")
    print(f"sliding_window=64:   {'runs' if longer is None else 'died: ' + longer}  (longer than the stream: the "
          "harness's 'without the window')")
    print(f"sliding_window=None: {'runs' if plain is None else 'died: ' + plain}")
    reproduced = windowed is not None and longer is None
    print("reproduced" if reproduced else "not reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
