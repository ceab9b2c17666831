# The standalone repro of docs/findings/llama-swa-only-kshift-abort.md (tests/test_engine_llama.py runs it in a child):
#   PYTHONPATH=. .venv-llama/bin/python scripts/repro/llama_shift_abort.py [LAYERS]
import sys
import llama_cpp as L
from impl.engines import tiny, llama   # the GGUF: a tiny seeded Gemma 3 converted by the release's convert_hf_to_gguf.py

layers = int(sys.argv[1]) if len(sys.argv) > 1 else 3
pattern = ["sliding_attention"] * layers if layers < 6 else ["sliding_attention"] * 5 + ["full_attention"]
t = tiny.build("gemma3_text", 4, overrides={"tie_word_embeddings": True, "num_hidden_layers": layers,
                                             "layer_types": pattern})
path = llama.converted(t)
L.llama_backend_init()
model = L.llama_model_load_from_file(str(path).encode(), L.llama_model_default_params())
cp = L.llama_context_default_params()
cp.n_ctx = cp.n_batch = cp.n_ubatch = 64
cp.n_seq_max, cp.swa_full, cp.kv_unified = 1, False, True
cp.type_k = cp.type_v = L.GGML_TYPE_F32
ctx = L.llama_init_from_model(model, cp)
mem = L.llama_get_memory(ctx)
print("n_layer", L.llama_model_n_layer(model), "n_swa", L.llama_model_n_swa(model),
      "can_shift", L.llama_memory_can_shift(mem), flush=True)
b = L.llama_batch_init(64, 0, 1)
def decode(toks, p0):
    for j, tok in enumerate(toks):
        b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = tok, p0 + j, 1, 1
        b.seq_id[j][0] = 0
    b.n_tokens = len(toks)
    return L.llama_decode(ctx, b)
print("decode", decode([5, 6, 7, 8, 9], 0), flush=True)
L.llama_memory_seq_add(mem, 0, 0, -1, 2)      # shift every position of sequence 0 by +2
print("seq_add returned; next decode (applies the K shift):", flush=True)
print("decode", decode([10], 7), flush=True)  # aborts here when every layer is SWA
