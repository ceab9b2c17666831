"""The decoder protocol (DESIGN §4) as the gate drives it: what a subject must have, what it may have,
and the one place a subject's answers are read and its exceptions classified.

Required: ``reset()`` (a new stream: the next position is 0, the identity stays), ``prefill(token_ids)
-> logits`` (a chunk at the next position, one row per token; the first call after ``reset()`` is the
prompt, later ones are chunked prefill), ``decode(token_id) -> logits`` (one row), ``full(token_ids) ->
logits`` (no cache, under the current identity: the reference) and ``identity() -> dict`` (every
attribute that changes K, V, mask or positions: ``weights_revision``, ``adapter``, ``rope_theta``,
``rope_scaling``, ``window`` (per layer, ``None`` = global), ``dtype``, ``kv_head_map``, ``padding_side``;
``head_dim`` and ``block_size`` where they exist). Logits are anything ``numpy.asarray`` takes (torch
tensors too), ``[T, vocab]`` / ``[vocab]``.

Optional, each used where present and named "not applicable" in the report where absent:

* ``set_identity(**changes)`` — change identity attributes (keys of ``identity()``) in place;
* ``snapshot()`` / ``restore(state)`` — the live cache out and back in (a prefix hit, a pre-emption);
* ``tolerance`` — a class attribute: the absolute logits tolerance of cached against ``full()``, or
  ``(atol, rtol)`` for ``|got - ref| <= atol + rtol * |ref|`` (default :data:`DEFAULT_TOLERANCE`);
* ``kv_bytes() -> int`` — bytes of K/V the live cache holds;
* ``kv_layers()`` / ``full_kv(token_ids)`` — per layer, the cache's ``{"window", "positions", "k",
  "v"}`` (rows ``[L, ...]``, oldest first) and the full forward's ``{"k", "v"}`` (rows ``[n, ...]``);
* ``batch(rows, chunks) -> [logits per row]`` — ragged ``rows`` padded (on the identity's
  ``padding_side``) into one batch on a cache of its own, fed ``chunks`` columns per call; each row's
  logits for its own tokens;
* ``inject(fault)`` — ``"position"`` (later tokens one position ahead) or ``"drop-oldest"`` (the
  oldest entry the next query needs gone): the two negative controls that cannot be built from
  outside the cache (:mod:`fuzz.gate.controls`).

A :class:`Subject` is a spec, a factory of fresh instances and a tolerance; a :class:`Handle` is one
instance seen through the protocol. Everything the instance raises becomes :class:`SubjectError` (the
subject's own outcome: a refusal or a crash, judged by the step that made the call), except
:class:`impl.errors.Unavailable`, which is the adapter failing to drive third-party code on this
machine: a harness fault (:class:`GateFault`, exit 3), never evidence about the subject.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from fuzz.targets.base import raised, subject_call
from impl.errors import Unavailable

REQUIRED = ("reset", "prefill", "decode", "full", "identity")
OPTIONAL = ("set_identity", "snapshot", "restore", "kv_bytes", "kv_layers", "full_kv", "batch", "inject")
#: The identity attributes seed 000 names, in the order reports list them.
STANDARD_IDENTITY = ("weights_revision", "adapter", "rope_theta", "rope_scaling", "window", "dtype",
                     "kv_head_map", "padding_side")
#: ``(atol, rtol)`` of cached against ``full()`` for a subject that declares no ``tolerance``: float32
#: rounding of O(1) logits through a few layers stays below it, and the bug classes move logits by 1e-3 .. 1.
DEFAULT_TOLERANCE = (1e-5, 1e-5)


class SubjectError(Exception):
    """The subject raised (or answered outside the protocol) in ``method``; ``cause`` is what it raised."""

    def __init__(self, spec: str, method: str, cause: BaseException | str):
        self.spec, self.method = spec, method
        self.cause = cause if isinstance(cause, BaseException) else None
        what = raised(cause) if isinstance(cause, BaseException) else str(cause)
        self.what = what.splitlines()[0][:300] if what else type(cause).__name__
        super().__init__(f"{spec}: {method} raised {self.what}")


class GateFault(Exception):
    """A harness fault: the gate or an adapter cannot do its job here (exit 3); one line of reason."""


class ProtocolUsageError(ValueError):
    """A class that is not a decoder-protocol subject (a usage error, exit 2); the message says why."""


def check_class(cls: Any, spec: str) -> None:
    missing = [m for m in REQUIRED if not callable(getattr(cls, m, None))]
    if missing:
        raise ProtocolUsageError(
            f"{spec} does not implement the decoder protocol: missing {', '.join(missing)} (needs reset(), "
            "prefill(token_ids), decode(token_id), full(token_ids), identity(); optional set_identity(**changes), "
            "snapshot()/restore(state))")


def parse_tolerance(value: Any, where: str) -> tuple[float, float]:
    """``tolerance`` as ``(atol, rtol)``: a number is an absolute tolerance."""
    if value is None:
        return DEFAULT_TOLERANCE
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = (float(value), 0.0)
    try:
        atol, rtol = (float(x) for x in value)
    except (TypeError, ValueError):
        raise ProtocolUsageError(f"{where}: tolerance must be a number or (atol, rtol), got {value!r}") from None
    if not (atol >= 0 and rtol >= 0):
        raise ProtocolUsageError(f"{where}: tolerance must be >= 0, got {value!r}")
    return atol, rtol


@dataclass
class Subject:
    """What ``--baseline`` / ``--candidate`` names: ``factory()`` builds a fresh instance (one stream)."""

    spec: str
    factory: Callable[[], Any]
    tolerance: tuple[float, float] = DEFAULT_TOLERANCE
    #: one line for the report: what this subject is
    description: str = ""
    #: versions of third-party code it runs (reports)
    versions: dict[str, str] = field(default_factory=dict)

    #: Logits per token, once the gate has probed it (``None`` before): every later answer must have it.
    vocab: int | None = None

    def new(self) -> "Handle":
        try:
            obj = subject_call(self.factory)
        except Unavailable as e:
            raise GateFault(f"{self.spec}: cannot build an instance here: {e}") from e
        except Exception as e:  # noqa: BLE001 - the subject's constructor: its outcome
            raise SubjectError(self.spec, "__init__", e) from e
        return Handle(self, obj)


class Handle:
    """One instance of a subject. Logits come back as float64 arrays of the shapes the protocol says;
    anything else, and any exception, is the subject's :class:`SubjectError`."""

    def __init__(self, subject: Subject, obj: Any):
        self.subject, self.obj, self.spec = subject, obj, subject.spec
        # read on the type: an instance's own __getattr__ (a RemoteInstance forwards to its child) is not asked
        self.remote = getattr(type(obj), "gate_remote", False) is True
        #: Seconds the subject spent in the last call, measured where it runs (an isolated subject's child).
        self.seconds = 0.0

    def has(self, method: str) -> bool:
        return callable(getattr(self.obj, method, None))

    def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        fn = getattr(self.obj, method, None)
        if not callable(fn):
            raise SubjectError(self.spec, method, f"the subject has no {method}()")
        try:
            t0 = time.perf_counter()
            out = subject_call(fn, *args, **kw)  # a SystemExit or KeyboardInterrupt of its own is its outcome too
            self.seconds = self.obj.last_seconds if self.remote else time.perf_counter() - t0
            return out
        except Unavailable as e:
            raise GateFault(f"{self.spec}: {method}: {e}") from e
        except Exception as e:  # noqa: BLE001 - whatever the subject raises is its outcome
            raise SubjectError(self.spec, method, e) from e

    def _array(self, method: str, what: str, out: Any) -> np.ndarray:
        """``out`` as a finite float64 array; anything else is the subject's answer outside the protocol."""
        def convert(x: Any) -> np.ndarray:  # runs the subject's own code (a tensor's, an __array__'s)
            if hasattr(x, "detach"):
                x = x.detach().cpu().double().numpy()
            return np.asarray(x, dtype=np.float64)

        try:
            a = subject_call(convert, out)
        except Exception as e:  # noqa: BLE001 - what it returned does not convert: its answer, not the harness's
            raise SubjectError(self.spec, method, f"returned {type(out).__name__}, not {what} ({e})") from e
        if a.size and not np.isfinite(a).all():
            bad = int(np.size(a) - np.isfinite(a).sum())
            raise SubjectError(self.spec, method, f"returned {what} with {bad} value(s) that are NaN or infinite")
        return a

    def _rows(self, method: str, out: Any, n: int) -> np.ndarray:
        a = self._array(method, "logits", out)
        if a.ndim == 1 and n == 1:
            a = a[None, :]
        if a.ndim != 2 or a.shape[0] != n:
            raise SubjectError(self.spec, method, f"returned logits of shape {a.shape} for {n} token(s)")
        vocab = self.subject.vocab
        if vocab is not None and a.shape[1] != vocab:
            raise SubjectError(self.spec, method, f"returned {a.shape[1]} logits per token; it answered {vocab} "
                                                  "when the gate probed it (its vocabulary)")
        return a

    def _layers(self, method: str, out: Any, n: int | None) -> list[dict[str, Any]]:
        """``kv_layers()`` (``n`` None: each layer's ``window``, ``positions`` and rows for them) or ``full_kv``
        (``n`` rows each) as plain dicts of finite float64 arrays; any other shape is the subject's failure."""
        try:
            layers = list(out)
        except Exception as e:  # noqa: BLE001
            raise SubjectError(self.spec, method, f"returned {type(out).__name__}, not a list of layers ({e})") from e
        clean = []
        for i, lay in enumerate(layers):
            if not isinstance(lay, dict) or not {"k", "v"} <= set(lay) or (n is None and "positions" not in lay):
                raise SubjectError(self.spec, method, f"layer {i} is not a dict with "
                                                      f"{'positions, ' if n is None else ''}k and v")
            row = dict(lay)
            if n is None:
                w = lay.get("window")
                if w is not None and (isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 1):
                    raise SubjectError(self.spec, method, f"layer {i} window is {w!r}, not None or an int >= 1")
                pos = self._array(method, f"layer {i} positions", lay["positions"]).reshape(-1)
                if not (pos == np.round(pos)).all():
                    raise SubjectError(self.spec, method, f"layer {i} positions are not integers")
                row["positions"] = [int(p) for p in pos]
            rows = len(row["positions"]) if n is None else n
            for label in ("k", "v"):
                a = self._array(method, f"layer {i} {label}", lay[label])
                if (a.size % rows if rows else a.size) or (rows == 0 and a.size):
                    raise SubjectError(self.spec, method, f"layer {i} {label} has {a.size} values, not a whole number "
                                                          f"of rows for {rows} position(s)")
                row[label] = a.reshape(rows, -1) if rows else a.reshape(0, 0)
            clean.append(row)
        return clean

    def reset(self) -> None:
        self._call("reset")

    def prefill(self, tokens: Sequence[int]) -> np.ndarray:
        toks = [int(t) for t in tokens]
        return self._rows("prefill", self._call("prefill", toks), len(toks))

    def decode(self, token: int) -> np.ndarray:
        return self._rows("decode", self._call("decode", int(token)), 1)[0]

    def full(self, tokens: Sequence[int]) -> np.ndarray:
        toks = [int(t) for t in tokens]
        return self._rows("full", self._call("full", toks), len(toks))

    def identity(self) -> dict[str, Any]:
        ident = self._call("identity")
        if not isinstance(ident, dict):
            raise SubjectError(self.spec, "identity", f"returned {type(ident).__name__}, not a dict")
        return dict(ident)

    def set_identity(self, **changes: Any) -> None:
        self._call("set_identity", **changes)

    def snapshot(self) -> Any:
        return self._call("snapshot")

    def restore(self, state: Any) -> None:
        self._call("restore", state)

    def kv_bytes(self) -> int:
        out = self._call("kv_bytes")
        if isinstance(out, bool) or not isinstance(out, (int, np.integer, float, np.floating)) \
                or not np.isfinite(out) or out < 0 or out != int(out):
            raise SubjectError(self.spec, "kv_bytes", f"returned {out!r}, not a whole number of bytes >= 0")
        return int(out)

    def kv_layers(self) -> list[dict[str, Any]]:
        return self._layers("kv_layers", self._call("kv_layers"), None)

    def full_kv(self, tokens: Sequence[int]) -> list[dict[str, Any]]:
        toks = [int(t) for t in tokens]
        return self._layers("full_kv", self._call("full_kv", toks), len(toks))

    def batch(self, rows: Sequence[Sequence[int]], chunks: Sequence[int]) -> list[np.ndarray]:
        out = self._call("batch", [list(map(int, r)) for r in rows], list(chunks))
        try:
            out = list(out)
        except Exception as e:  # noqa: BLE001
            raise SubjectError(self.spec, "batch", f"returned {type(out).__name__}, not a list of logits") from e
        if len(out) != len(rows):
            raise SubjectError(self.spec, "batch", f"returned {len(out)} rows of logits for {len(rows)} rows")
        return [self._rows("batch", o, len(r)) for o, r in zip(out, rows)]

    def inject(self, fault: str) -> None:
        self._call("inject", fault)
