"""OpenVINO models: a tiny seeded Hugging Face model converted to OpenVINO IR and run on the CPU plugin.

**Which exporter, and why.** optimum-intel (OpenVINO's own Hugging Face exporter) cannot be installed beside the
transformers release kvwindow's ``[hf]`` resolves here: optimum-intel 2.2.0 (the newest) requires
``transformers<5.6,>=4.51`` and the venv pins 5.25.0; pip then falls back to optimum-intel 1.15.0, whose import
fails on openvino 2026.4 (``from openvino.runtime import ...``: the module was removed). So the model is converted
by **openvino's own** ``openvino.convert_model`` on the torch model (the frontend optimum-intel itself calls,
``optimum/exporters/openvino/convert.py``), traced with ``example_input`` over a forward without a cache: the
sliding-window mask transformers builds (``masking_utils``) is traced into the graph, so the window the engine
applies is whatever that trace kept. Attention is ``eager`` (Gemma 2's soft-capping is refused by ``sdpa``).

**The window convention.** None of this module's: the HF config's ``sliding_window = W`` is the spec's ``W``
(as every ``hf:`` target), and the converted graph carries it only through the traced mask.

What is not driven: the stateful decode model (``past_key_values`` as ReadValue/Assign state) is optimum-intel's
export (``patch_stateful``), not reachable without it; the ``ov:paged`` target drives the PagedAttention op that
serving uses instead.

Conversions are cached (:mod:`impl.engines.store`, IR ``model.xml``/``model.bin``) by the model's fingerprint,
the window and the openvino, torch and transformers versions.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from impl.engines import store
from impl.engines.ov import release
from impl.engines.tiny import TinyModel, hf_model

ATTN = "eager"


def converted(tiny: TinyModel) -> Path:
    """The IR folder of ``tiny`` (float32 weights, dynamic batch and length), once per key."""
    import torch
    import transformers

    key = {"engine": "openvino", "release": release(), "torch": torch.__version__,
           "transformers": transformers.__version__, "arch": tiny.arch, "window": tiny.window,
           "weights": tiny.fingerprint(), "attn": ATTN}

    def build(out: Path) -> None:
        import openvino as ov

        model = hf_model(tiny)
        model.config._attn_implementation = ATTN
        model.config.use_cache = False

        class Logits(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids, attention_mask):
                return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

        ex = torch.randint(3, tiny.vocab, (2, 2 * tiny.window + 3))
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            om = ov.convert_model(Logits(model).eval(), example_input=(ex, torch.ones_like(ex)),
                                  input=[("input_ids", [-1, -1], ov.Type.i64),
                                         ("attention_mask", [-1, -1], ov.Type.i64)])
        ov.save_model(om, str(out / "model.xml"), compress_to_fp16=False)

    return store.entry("ov", key, build)


class OvModel:
    """One converted model compiled on the CPU plugin in f32 (``threads`` inference threads)."""

    def __init__(self, tiny: TinyModel, threads: int = 1):
        import openvino as ov

        self.tiny = tiny
        core = ov.Core()
        self.compiled = core.compile_model(core.read_model(str(converted(tiny) / "model.xml")), "CPU",
                                           {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads,
                                            "NUM_STREAMS": 1})
        self.request = self.compiled.create_infer_request()

    def forward(self, rows: list[list[int]]) -> list[np.ndarray]:
        """Logits of every position of each row; rows of different lengths are right-padded (pad id 0, mask 0)."""
        n = max(len(r) for r in rows)
        ids = np.zeros((len(rows), n), np.int64)
        mask = np.zeros((len(rows), n), np.int64)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        out = np.asarray(self.request.infer({"input_ids": ids, "attention_mask": mask})[0], np.float32)
        return [out[i, :len(r)] for i, r in enumerate(rows)]
