"""``--target py-decoder:module.path:ClassName``: a user's decoder (the decoder protocol of DESIGN §4, the
subjects of ``kvwindow gate``) fuzzed with the op language, cached logits against its own ``full()``.

The same class a gate takes: resolved from the current directory first, built with no arguments
(:func:`fuzz.gate.subjects.py_decoder.load_class`; one that cannot be built is a usage error), driven
through :class:`fuzz.gate.protocol.Handle`. Per stream: ``Push`` decodes one token (a stream's first
token is a one-token prefill), ``Chunk(n)`` prefills ``n`` tokens at the next position (``n = 0`` makes
no call), ``Reset(w)`` starts a new stream. The window of each stream is set with
``set_identity(window=...)`` (every sliding layer gets ``w``) where the class has it and reports a
``window``; otherwise the class runs at its own window and the case's windows only shape the streams
(the report's versions say which). Token ids are a pure function of ``(stream epoch, position)``
(:func:`fuzz.targets.decoder.token_of`), so a seed replays identically.

After every op that feeds tokens, the new rows must equal ``full(history)``'s rows at the class's
``tolerance`` (:func:`fuzz.gate.protocol.parse_tolerance`): a mismatch is a finding; an exception the
class raises on a valid op is a crash; :class:`impl.errors.Unavailable` raised inside it is a harness fault.
"""

from __future__ import annotations

from typing import Any

from fuzz.gate.compare import within
from fuzz.gate.protocol import GateFault, ProtocolUsageError, Subject, SubjectError, parse_tolerance
from fuzz.gate.subjects.py_decoder import load_class
from fuzz.ops import Case, Chunk, Push, Reset
from fuzz.oracle import phases_of
from fuzz.targets.base import Crash, HarnessFault, Mismatch, RunStats, Target, TargetError
from fuzz.targets.decoder import token_of
from fuzz.targets.progress import OP


class PyDecoderTarget(Target):
    kind = "model"
    window_max = 16
    max_tokens = 64
    publishes_ops = True

    def __init__(self, spec: str, cls: Any):
        self.name = spec
        self.subject = Subject(spec, cls, parse_tolerance(getattr(cls, "tolerance", None), spec))
        probe = self.subject.new()
        self.vocab = self.subject.vocab = probe.full([0]).shape[-1]  # every later answer is checked against it
        ident = probe.identity()
        self.windowed = probe.has("set_identity") and isinstance(ident.get("window"), (list, tuple, int))
        self.layers = ident.get("window")

    def versions(self) -> dict[str, str]:
        return {"windows": "set per stream with set_identity(window=...)" if self.windowed else
                f"the class's own ({self.layers!r}); set_identity(window=) is not offered"}

    def tolerances(self) -> dict[str, dict[str, float]]:
        atol, rtol = self.subject.tolerance
        return {"logits": {"atol": atol, "rtol": rtol}}

    def _window(self, w: int) -> Any:
        if isinstance(self.layers, (list, tuple)):
            return [w if isinstance(x, int) and not isinstance(x, bool) else x for x in self.layers]
        return w

    def run(self, case: Case) -> RunStats:
        stats = RunStats()
        try:
            h = self.subject.new()
        except SubjectError as e:
            raise Crash(self.name, -1, None, f"raised {e.what} building the decoder") from e
        except GateFault as e:
            raise HarnessFault(self.name, str(e)) from e
        slot = self.op_slot
        hist: list[int] = []
        epoch, window, after_reset = 0, case.window, False
        i, op = -1, None
        try:
            if self.windowed:
                h.set_identity(window=self._window(case.window))
                h.reset()
            for i, op in enumerate(case.ops):
                if slot is not None:
                    slot[OP] = i
                if isinstance(op, Reset):
                    after_reset = after_reset or bool(hist)
                    epoch, hist, window = epoch + 1, [], op.window
                    if self.windowed:
                        h.set_identity(window=self._window(op.window))
                    h.reset()
                    continue
                k = op.tokens if isinstance(op, (Push, Chunk)) else 0
                if k == 0:
                    continue
                start = len(hist)
                toks = [token_of(epoch, p, self.vocab) for p in range(start, start + k)]
                rows = h.decode(toks[0])[None, :] if (isinstance(op, Push) and start) else h.prefill(toks)
                hist += toks
                stats.tokens += k
                stats.phases |= phases_of(op, start, len(hist), window, after_reset)
                d = within(rows, h.full(hist)[start:], self.subject.tolerance, list(range(start, len(hist))))
                if d:
                    raise Mismatch(self.name, i, op, f"cached {d} against full()")
        except SubjectError as e:
            raise Crash(self.name, i, op, f"{e.method} raised {e.what}") from e
        except GateFault as e:
            raise HarnessFault(self.name, str(e)) from e
        return stats


def make_py_decoder(path: str) -> Target:
    spec = "py-decoder:" + path
    try:
        cls = load_class(spec)
        return PyDecoderTarget(spec, cls)
    except (ProtocolUsageError, SubjectError) as e:
        raise TargetError(str(e)) from e
