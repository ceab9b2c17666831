# Standalone: transformers' continuous batching with sliding_window=1 lets a multi-token prefill chunk attend to
# earlier tokens of the chunk (transformers 5.25.0; torch 2.13.0+cpu; nothing downloaded).
import torch
from transformers import GenerationConfig, MistralConfig, MistralForCausalLM
from transformers.generation.configuration_utils import ContinuousBatchingConfig
from transformers.generation.continuous_batching.utils import build_attention_mask

# 1. The mask itself: one request, a 4-token prefill, W = 1. The spec (each query sees only itself) is the
#    identity; build_attention_mask applies the window only `if sliding_window > 1` (utils.py line 189).
for w in (1, 2):
    m = torch.zeros(1, 1, 4, 4)
    build_attention_mask(m, [0, 4], [0, 4], sliding_window=w)
    print(f"W={w}: keys each query sees:", [[int(k) for k in (m[0, 0, q] == 0).nonzero().flatten()] for q in range(4)])
# W=1 prints [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]] (causal, no window); W=2 prints [[0], [0, 1], [1, 2], [2, 3]]

# 2. End to end: the first generated token's log-probability against the same model's plain forward.
torch.manual_seed(0)
cfg = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=8, sliding_window=1, attn_implementation="sdpa")
model = MistralForCausalLM(cfg).double().eval()
for p in model.parameters():
    torch.nn.init.normal_(p, std=0.5)
prompt = [5, 9, 13, 17]
with torch.no_grad():
    plain = torch.log_softmax(model(torch.tensor([prompt])).logits[0, -1].double(), -1)  # the model's own W=1 mask
gc = GenerationConfig(max_new_tokens=1, do_sample=False, eos_token_id=-1, pad_token_id=0)
print(f"plain forward: greedy token {int(plain.argmax())} logprob {float(plain.max()):.5f}")
for mbt in (8, 1):  # 8: the prompt is one prefill chunk; 1: four one-token chunks (each sees only itself)
    cb = ContinuousBatchingConfig(page_size=4, num_blocks=16, max_batch_tokens=mbt, return_logprobs=True,
                                  allow_block_sharing=False)
    out = next(iter(model.generate_batch([prompt], generation_config=gc, continuous_batching_config=cb,
                                         warmup=False).values()))
    tok = out.generated_tokens[0]
    print(f"generate_batch max_batch_tokens={mbt}: token {tok} logprob {out.logprobs[0]:.5f} "
          f"(plain forward's logprob of {tok}: {float(plain[tok]):.5f})")
