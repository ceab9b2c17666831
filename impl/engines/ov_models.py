"""OpenVINO models: a tiny seeded Hugging Face model exported to OpenVINO IR and run on the CPU plugin.

**Which exporter.** optimum-intel (OpenVINO's own Hugging Face exporter) where it imports: its stateful export
(``OVModelForCausalLM.from_pretrained(export=True)``: ``past_key_values`` become ReadValue/Assign state) is what
openvino.genai and optimum users run. optimum-intel 2.2.0 (the newest) requires ``transformers<5.6,>=4.51``, so it
cannot sit beside the transformers 5.25.0 that kvwindow's ``[dev,hf]`` resolves: pip then falls back to
optimum-intel 1.15.0, whose import fails on openvino 2026.4 (``from openvino.runtime import ...``, a module that is
gone). scripts/ci_ov.sh installs optimum-intel 2.2.0 with transformers 5.5.4 in a venv of its own. Where it does not
import, the model is converted by **openvino's own** ``openvino.convert_model`` on the torch model (the frontend
optimum-intel itself calls) with ``example_input`` over a cacheless forward: the sliding-window mask transformers
builds is traced into the graph. :func:`exporter` says which, and why.

**The window convention.** None of this module's: the HF config's ``sliding_window = W`` is the spec's ``W`` (as
for every ``hf:`` target); the exported graph carries it through the traced mask. openvino.genai turns the stateful
model into PagedAttention ops by ``paged_attention_transformation`` (``SDPAToPagedAttention``), whose
``StateManagementPattern`` reads the mask's offset (``state_management_pattern.cpp``: ``sliding_window =
-offset`` for a ``kv_idx > q_idx + offset`` mask, the form transformers 5.x traces): :func:`paged_window` drives
that pass and reads the value it wrote.

Exports are cached (:mod:`impl.engines.store`) by the model's fingerprint, the window, the exporter and the
openvino, torch and transformers versions.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from impl.engines import store
from impl.engines.ov import release
from impl.engines.tiny import TinyModel, hf_model

ATTN = "eager"


#: optimum-intel's export config class per architecture (``optimum/exporters/openvino/model_configs.py``): its
#: ``MIN_/MAX_TRANSFORMERS_VERSION`` say which transformers it exports on (2.2.0: Mistral >= 4.57, Gemma 2 and
#: Gemma 3 text 4.57 .. 5.0).
OPTIMUM_CONFIG = {"mistral": "MistralOpenVINOConfig", "gemma2": "Gemma2OpenVINOConfig",
                  "gemma3_text": "Gemma3TextOpenVINOConfig"}


def exporter(arch: str = "mistral") -> tuple[str, str]:
    """``("optimum-intel", release)`` where optimum-intel imports and its export config for ``arch`` accepts the
    installed transformers; else ``("convert_model", why optimum-intel is not used)``."""
    from importlib import metadata

    try:
        rel = metadata.version("optimum-intel")
    except metadata.PackageNotFoundError:
        return "convert_model", "optimum-intel is not installed (its newest release needs transformers<5.6)"
    try:
        import transformers
        from optimum.exporters.openvino import model_configs
        from optimum.intel.openvino import OVModelForCausalLM  # noqa: F401
        from packaging.version import Version
    except Exception as e:  # noqa: BLE001 - an optimum-intel that does not import here
        return "convert_model", f"optimum-intel {rel} does not import: {type(e).__name__}: {str(e)[:120]}"
    cfg = getattr(model_configs, OPTIMUM_CONFIG.get(arch, ""), None)
    if cfg is None:
        return "convert_model", f"optimum-intel {rel} has no OpenVINO export config for {arch}"
    tv = Version(transformers.__version__)
    lo, hi = getattr(cfg, "MIN_TRANSFORMERS_VERSION", None), getattr(cfg, "MAX_TRANSFORMERS_VERSION", None)
    if (lo and tv < Version(str(lo))) or (hi and tv > Version(str(hi))):
        return "convert_model", (f"optimum-intel {rel} exports {arch} on transformers {lo or ''}..{hi or ''} only "
                                 f"(installed {transformers.__version__})")
    return "optimum-intel", rel


def exported(tiny: TinyModel) -> Path:
    """The folder optimum-intel's stateful export of ``tiny`` wrote (``save_pretrained``), once per key."""
    import torch
    import transformers

    kind, rel = exporter(tiny.arch)
    key = {"engine": "openvino", "release": release(), "optimum-intel": rel, "torch": torch.__version__,
           "transformers": transformers.__version__, "arch": tiny.arch, "window": tiny.window,
           "weights": tiny.fingerprint()}

    def build(out: Path) -> None:
        import tempfile

        from optimum.intel import OVModelForCausalLM

        from impl.engines.tiny import save_hf

        with tempfile.TemporaryDirectory(prefix="kvwindow-hf-") as src, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            save_hf(tiny, Path(src))
            m = OVModelForCausalLM.from_pretrained(src, export=True, load_in_8bit=False, compile=False)
            m.save_pretrained(out)

    return store.entry("ov-optimum", key, build)


class OptimumModel:
    """optimum-intel's stateful model on the CPU plugin in f32: a forward of right-padded rows (the state reset
    first) and steps onto the state (one token, or a chunk)."""

    def __init__(self, tiny: TinyModel, threads: int = 1):
        from optimum.intel import OVModelForCausalLM

        self.tiny = tiny
        self.folder = exported(tiny)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.m = OVModelForCausalLM.from_pretrained(
                self.folder, compile=True, ov_config={"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32",
                                                      "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1})

    def forward(self, rows: list[list[int]]) -> list[np.ndarray]:
        import torch

        n = max(len(r) for r in rows)
        ids = torch.zeros((len(rows), n), dtype=torch.long)
        mask = torch.zeros((len(rows), n), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r)
            mask[i, :len(r)] = 1
        out = self.m(input_ids=ids, attention_mask=mask).logits.float().numpy()
        return [out[i, :len(r)] for i, r in enumerate(rows)]

    def steps(self, tokens: list[int], sizes: list[int]) -> np.ndarray:
        """Feed ``tokens`` in steps of ``sizes`` onto the state (the first step a prefill, then decode steps and
        chunks); the logits of every position, ``[len(tokens), V]``."""
        import torch

        out, pkv, at = [], None, 0
        for n in sizes:
            ids = torch.tensor([tokens[at:at + n]])
            res = self.m(input_ids=ids, attention_mask=torch.ones((1, at + n), dtype=torch.long), past_key_values=pkv)
            pkv = res.past_key_values
            out.append(res.logits[0].float().numpy())
            at += n
        return np.concatenate(out)


def paged_window(folder: Path) -> list[int]:
    """The ``sliding_window`` input of every PagedAttention op after openvino.genai's pass
    (``paged_attention_transformation``) over the stateful model in ``folder``, evaluated."""
    import openvino as ov
    from openvino._offline_transformations import paged_attention_transformation

    core = ov.Core()
    model = core.read_model(str(Path(folder) / "openvino_model.xml"))
    paged_attention_transformation(model)
    out = []
    for op in model.get_ordered_ops():
        if op.get_type_name() == "PagedAttentionExtension":
            sub = ov.Model([op.input_value(10)], [], "sliding_window")
            out.append(int(np.asarray(core.compile_model(sub, "CPU")({})[0])))
    return out


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
