# Standalone: vLLM 0.33.0's KVCacheManager with one sliding-window group, sliding_window=1.
import torch
for op in ("nms", "qnms"):  # see impl/serving/_imports.py: torchvision's CUDA wheel on a CPU torch
    try: torch.library.define(f"torchvision::{op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    except RuntimeError: pass
from vllm.v1.kv_cache_interface import SlidingWindowSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.utils.hashing import get_hash_fn_by_name
from vllm.v1.request import Request
from vllm.sampling_params import SamplingParams

B = 2
spec = SlidingWindowSpec(block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32, sliding_window=1)
cfg = KVCacheConfig(num_blocks=9, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)])
m = KVCacheManager(cfg, max_model_len=4096, scheduler_block_size=B, hash_block_size=B, enable_caching=True)
h = get_hash_fn_by_name("sha256"); init_none_hash(h); hasher = get_request_block_hasher(B, h)
req = lambda rid, toks: Request(rid, toks, SamplingParams(max_tokens=16), None, block_hasher=hasher)

prompt = [11, 12, 13, 14, 15, 16, 17]
blocks, hit, _ = m.get_computed_blocks(req("a", prompt))
print("nothing cached: hit", hit, "(with W=1 the next query reads no cached KV: a hit of 6 is valid)")
r = req("b", prompt[:4]); m.allocate_slots(r, 4); r.num_computed_tokens = 4; m.free(r)  # would cache blocks 0, 1
blocks, hit, _ = m.get_computed_blocks(req("c", prompt))
print("after a request computed tokens 0..3: hit", hit, "(valid: 6)")
print("blocks vLLM cached for that request:", len(m.block_pool.cached_block_hash_to_block))
