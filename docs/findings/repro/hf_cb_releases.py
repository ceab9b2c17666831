# Standalone, any transformers from 4.57 (continuous batching with sliding windows) to 5.25: generate_batch on a
# tiny Mistral at W = 1, 2, 3, 64 against the same model's plain forward (greedy tokens on a copy made before the
# call), and the mask build_attention_mask builds for a 4-token chunk at W = 1. Used for the release lines of
# docs/findings/hf-cb-window-1-prefill.md and hf-cb-sliding-ring-start.md. Nothing downloaded.
import torch, transformers, logging
from transformers import GenerationConfig, MistralConfig, MistralForCausalLM
try:
    from transformers.generation.continuous_batching.utils import build_attention_mask
except ImportError:
    from transformers.generation.continuous_batching.continuous_api import build_attention_mask
print("transformers", transformers.__version__)
from transformers.generation.continuous_batching import cache as _cache
if hasattr(_cache, "get_device_and_memory_breakdown"):  # 4.57: on a CPU the memory query returns total=None
    _real = _cache.get_device_and_memory_breakdown
    def _mem():
        d, total, r, a = _real()
        return d, (8 << 30) if total is None else total, r, a
    _cache.get_device_and_memory_breakdown = _mem
m = torch.zeros(1, 1, 4, 4); build_attention_mask(m, [0, 4], [0, 4], sliding_window=1)
print("W=1 mask rows:", [[int(k) for k in (m[0, 0, q] == 0).nonzero().flatten()] for q in range(4)])
torch.manual_seed(0)
for attn in ("sdpa", "eager"):
  for W in (1, 2, 3, 64):
    cfg = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=8, sliding_window=W, attn_implementation=attn)
    torch.manual_seed(0)
    model = MistralForCausalLM(cfg).float().eval()
    for p in model.parameters(): torch.nn.init.normal_(p, std=0.5)
    prompt = [5, 9, 13, 17]
    gc = GenerationConfig(max_new_tokens=4, do_sample=False, eos_token_id=-1, pad_token_id=0, num_blocks=16,
                          block_size=4, max_batch_tokens=8)
    import copy
    twin = copy.deepcopy(model)  # the plain forward runs on a copy: generate_batch leaves the model switched to paged attention
    try:
        from transformers.generation.configuration_utils import ContinuousBatchingConfig
        gc = GenerationConfig(max_new_tokens=4, do_sample=False, eos_token_id=-1, pad_token_id=0)
        kw = dict(continuous_batching_config=ContinuousBatchingConfig(num_blocks=16, max_batch_tokens=8))
    except ImportError:
        kw = {}
    res = model.generate_batch([prompt], generation_config=gc, progress_bar=False, **kw)
    out = next(iter(res.values()), None)
    if out is None or getattr(out, "error", None):
        print(f"{attn} W={W}: generate_batch returned no result ({getattr(out, 'error', 'nothing returned')})")
        continue
    toks = out.generated_tokens
    with torch.no_grad():
        plain = twin(torch.tensor([prompt + toks])).logits[0].argmax(-1).tolist()
    want = plain[len(prompt) - 1:len(prompt) - 1 + len(toks)]
    print(f"{attn} W={W}: generate_batch tokens {toks}; plain forward's greedy tokens on that sequence {want}")
