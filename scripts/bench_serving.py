"""Per-step cost of each serving adapter against its raw engine calls, measured side by side.

    .venv-serving/bin/python scripts/bench_serving.py [--steps 3000]

"raw" is the engine's own calls with nothing around them (the scheduler loop the adapter copies:
vLLM ``append_output_token_ids`` + ``allocate_slots`` + ``num_computed_tokens += 1``; SGLang
``alloc_decode`` + ``req_to_token_pool.write`` + ``free_swa_out_of_window_slots``); "adapter" is the
paged-protocol op (argument checks, token ids, the simulated KV store, eager freeing). Rounds of
the two alternate, so machine load hits both alike; the ratio is what is reported.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

W, B, N, D = 64, 16, 4096, 8


def ent(p, t):
    return (p, np.full(D, t, np.float32), np.full(D, t + 10, np.float32))


def vllm_raw(steps, hybrid=False):
    from impl.serving.vllm import VllmHybrid, VllmSwa

    a = VllmHybrid() if hybrid else VllmSwa()
    a.configure(W, B, N, D)
    v, m = a._v, a._m
    req = a._request("raw", [1, 2, 3], None)
    m.allocate_slots(req, 3)
    req.num_computed_tokens = 3
    t = time.perf_counter()
    for i in range(steps):
        req.append_output_token_ids(i % 5)
        m.allocate_slots(req, 1)
        req.num_computed_tokens += 1
    return (time.perf_counter() - t) / steps


def vllm_admit_raw(rounds, m_len=48):
    from impl.serving.vllm import VllmSwa

    a = VllmSwa()
    a.configure(W, B, N, D)
    m = a._m
    toks = [i % 7 for i in range(m_len)]
    t = time.perf_counter()
    for i in range(rounds):
        req = a._request(f"r{i}", toks, None)
        blocks, hit, _ = m.get_computed_blocks(req)
        m.allocate_slots(req, m_len - hit, num_new_computed_tokens=hit, new_computed_blocks=blocks)
        m.free(req)
    return (time.perf_counter() - t) / rounds


def adapter_steps(cls, steps):
    a = cls()
    a.configure(W, B, N, D)
    a.add(0)
    a.append_chunk(0, [ent(i, 1.0) for i in range(3)])
    es = [ent(3 + i, float(i % 5)) for i in range(steps)]
    t = time.perf_counter()
    for e in es:
        a.append(0, *e)
    return (time.perf_counter() - t) / steps


def vllm_admit_adapter(rounds, m_len=48):
    from impl.serving.vllm import VllmSwa

    a = VllmSwa()
    a.configure(W, B, N, D)
    prompt = [ent(i, float(i % 7)) for i in range(m_len)]
    t = time.perf_counter()
    for i in range(rounds):
        hit = a.admit(0, prompt)
        a.append_chunk(0, prompt[hit:])
        a.free(0)
    return (time.perf_counter() - t) / rounds


def sglang_raw(steps):
    from impl.serving.sglang import SglangSwa

    a = SglangSwa()
    a.configure(W, B, 64, D)
    a.add(0)
    a.append_chunk(0, [ent(i, 1.0) for i in range(3)])
    s, t_, al, r2t = a._s, a._t, a._al, a._r2t
    req, n = a._seqs[0].req, 3
    row = req.kv.req_pool_idx
    t = time.perf_counter()
    for _ in range(steps):
        last = r2t.req_to_token[row, n - 1:n].to(t_.int64)
        loc = al.alloc_decode(t_.tensor([n + 1]), t_.tensor([n + 1]), last)
        r2t.write((row, slice(n, n + 1)), loc.to(t_.int32))
        req.kv.kv_allocated_len += 1
        n += 1
        s.free_swa_out_of_window_slots(req, n, sliding_window_size=W - 1, page_size=B, req_to_token_pool=r2t,
                                       token_to_kv_pool_allocator=al, supports_prefix_sharing=False)
    return (time.perf_counter() - t) / steps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    from impl.serving.sglang import SglangSwa
    from impl.serving.vllm import VllmHybrid, VllmSwa

    rows = {"vllm:swa decode": (lambda: vllm_raw(a.steps), lambda: adapter_steps(VllmSwa, a.steps)),
            "vllm:hybrid decode": (lambda: vllm_raw(a.steps, hybrid=True), lambda: adapter_steps(VllmHybrid, a.steps)),
            "vllm:swa admission (48-token prompt)": (lambda: vllm_admit_raw(a.steps // 10),
                                                     lambda: vllm_admit_adapter(a.steps // 10)),
            "sglang:swa decode": (lambda: sglang_raw(a.steps), lambda: adapter_steps(SglangSwa, a.steps))}
    print(f"{'op':40s} {'raw us':>9s} {'adapter us':>11s} {'ratio':>6s}  (W={W} B={B} D={D}, best of {a.rounds})")
    for name, (raw, ad) in rows.items():
        rs, ads = [], []
        for _ in range(a.rounds):
            rs.append(raw())
            ads.append(ad())
        r, d = min(rs) * 1e6, min(ads) * 1e6
        print(f"{name:40s} {r:9.1f} {d:11.1f} {d / r:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
