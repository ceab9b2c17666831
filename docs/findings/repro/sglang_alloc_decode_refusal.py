# Standalone: SGLang 0.5.23's SWATokenToKVPoolAllocator.alloc_decode when the SWA pool is full.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repo root: impl/serving/_imports.py bridges torchvision
from impl.serving._imports import import_sglang
s = import_sglang()
import torch
B = 2
pool = s.SWAKVPool(size=64, size_swa=2 * B, page_size=B, dtype=torch.float32, head_num=1, head_dim=1,
                   swa_attention_layer_ids=[0], full_attention_layer_ids=[1], device="cpu")
al = s.SWATokenToKVPoolAllocator(64, 2 * B, B, torch.float32, "cpu", pool, need_sort=False)
loc = al.alloc_extend(torch.tensor([0]), torch.tensor([0]), torch.tensor([4]), torch.tensor([4]), torch.tensor([-1]), 4)
print("after prefill of 4: full", al.full_available_size(), "swa", al.swa_available_size())
out = al.alloc_decode(torch.tensor([5]), torch.tensor([5]), loc[-1:].to(torch.int64))
print("alloc_decode with the SWA pool empty ->", out, "; full", al.full_available_size(), "swa", al.swa_available_size())
