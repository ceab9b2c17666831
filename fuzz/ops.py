"""The op language every target is driven with, and :class:`Case`, the one type of a test case.

A test case is a window ``W`` plus a list of ops:

* ``Push()`` — one new token at the next position;
* ``Chunk(n)`` — a prefill chunk of ``n`` tokens (``n`` may be 0 or exceed ``W``);
* ``Reset(w)`` — start a new stream with window ``w`` (positions restart at 0);
* ``Bad(kind)`` — a call the contract says must be refused (``bad:gap``: a push one past the
  next position, ``bad:null-data``: a NULL key, ...; :data:`BAD_KINDS` lists them): the target
  must return the documented error (C) or raise (Python) and change nothing. A bad op feeds
  no tokens; a target that cannot take a kind says so through ``Target.accepts``.

The same ops drive a bare cache (push/push_chunk/reset), the Torch decoder
(decode one token / prefill a chunk / new cache) and third-party caches, so a
seed found on one implementation replays on all of them.

A :class:`Case` has exactly one text form of its ops (``push chunk:5 reset:3``,
what ``seeds add --ops`` reads and every report prints) and one JSON form
(``{"window": 3, "ops": [["push"], ["chunk", 5], ["reset", 3]]}``, what seed
files store); its :attr:`Case.id` hashes the JSON form, so the same case found
twice is one seed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable, Union

# ``tokens``: how many tokens the op feeds (every target, strategy and finding counts with it).


@dataclass(frozen=True)
class Push:
    tokens = 1

    @property
    def text(self) -> str:
        return "push"

    def to_json(self) -> list:
        return ["push"]


@dataclass(frozen=True)
class Chunk:
    n: int

    def __post_init__(self) -> None:
        if not _nat(self.n):
            raise OpError(f"chunk takes a token count n >= 0, got {self.n!r}")

    @property
    def tokens(self) -> int:
        return self.n

    @property
    def text(self) -> str:
        return f"chunk:{self.n}"

    def to_json(self) -> list:
        return ["chunk", self.n]


@dataclass(frozen=True)
class Reset:
    window: int
    tokens = 0

    def __post_init__(self) -> None:
        if not _nat(self.window) or self.window < 1:
            raise OpError(f"reset takes a window >= 1, got {self.window!r}")

    @property
    def text(self) -> str:
        return f"reset:{self.window}"

    def to_json(self) -> list:
        return ["reset", self.window]


#: Every kind of bad call, with what it sends. ``n`` is the next position, ``W`` the window.
#: Position kinds (every target that validates positions, C or Python):
#:   ``gap`` push at ``n + 1``; ``dup`` push at ``n - 1`` (a repeated position; ``-1`` when ``n = 0``);
#:   ``past`` push at ``n + W`` (past the end, in the next position's own slot);
#:   ``chunk-gap`` / ``chunk-dup`` a chunk of 2 from ``n + 1`` / ``n - 1``.
#: Python only: ``chunk-skip`` a chunk ``[n, n + 2]`` (its first entry is fine, its second is not).
#: The rest of ``csrc/ringkv.h`` (C targets): ``count`` a negative count (push_chunk, trace, read);
#: ``overflow`` a count whose positions pass INT64_MAX (push_chunk, trace; nothing to send at
#: ``n = 0``, where every count fits); ``null-handle`` every call on a NULL handle; ``null-data``
#: a NULL key, value, output or buffer where data is needed; ``read-cap0`` / ``read-short`` a read
#: with capacity 0 / length - 1; ``reset-0`` / ``reset-neg`` / ``reset-huge`` a reset to window
#: 0, to ``-W``, to INT64_MAX (no memory for it).
BAD_KINDS = ("gap", "dup", "past", "chunk-gap", "chunk-dup", "chunk-skip", "count", "overflow",
             "null-handle", "null-data", "read-cap0", "read-short", "reset-0", "reset-neg", "reset-huge")


@dataclass(frozen=True)
class Bad:
    kind: str
    tokens = 0

    @property
    def text(self) -> str:
        return f"bad:{self.kind}"

    def to_json(self) -> list:
        return ["bad", self.kind]


Op = Union[Push, Chunk, Reset, Bad]


class OpError(ValueError):
    """A case or op list that cannot be parsed; the message names the op and its index."""


def _nat(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def op_from_json(raw: Any, index: int = 0) -> Op:
    """Parse ``["push"]``, ``["chunk", n]``, ``["reset", w]`` or ``["bad", kind]``."""
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
        raise OpError(f"op #{index}: expected [\"push\"], [\"chunk\", n], [\"reset\", w] or [\"bad\", kind], "
                      f"got {raw!r}")
    kind, args = raw[0], raw[1:]
    if kind == "push" and not args:
        return Push()
    if kind == "chunk" and len(args) == 1 and _nat(args[0]):
        return Chunk(args[0])
    if kind == "reset" and len(args) == 1 and _nat(args[0]) and args[0] >= 1:
        return Reset(args[0])
    if kind == "bad" and len(args) == 1 and args[0] in BAD_KINDS:
        return Bad(args[0])
    if kind == "bad":
        raise OpError(f"op #{index}: unknown bad call {raw!r}; kinds: {', '.join(BAD_KINDS)}")
    raise OpError(f"op #{index}: malformed {raw!r} (chunk takes n >= 0, reset takes a window >= 1)")


def _ops_from_json(raw: Any) -> tuple[Op, ...]:
    if not isinstance(raw, list):
        raise OpError(f"ops must be a list, got {type(raw).__name__}")
    return tuple(op_from_json(r, i) for i, r in enumerate(raw))


def _ops_from_text(text: str) -> tuple[Op, ...]:
    ops: list[Op] = []
    for i, tok in enumerate(text.replace(",", " ").split()):
        name, _, arg = tok.partition(":")
        if name == "push" and not arg:
            ops.append(Push())
        elif name in ("chunk", "reset") and arg.isdigit():
            ops.append(op_from_json([name, int(arg)], i))
        elif name == "bad" and arg:
            ops.append(op_from_json([name, arg], i))
        else:
            raise OpError(f"op #{i}: cannot parse {tok!r}; write push, chunk:N, reset:W or bad:KIND")
    return tuple(ops)


@dataclass(frozen=True)
class Case:
    """A window and the ops that follow it: what a campaign generates, a target runs, a failure
    reports and a seed stores."""

    window: int
    ops: tuple[Op, ...] = ()

    def __post_init__(self) -> None:
        if not _nat(self.window) or self.window < 1:
            raise OpError(f"'window' must be an int >= 1, got {self.window!r}")
        if not isinstance(self.ops, tuple):
            object.__setattr__(self, "ops", tuple(self.ops))

    # -- the one text form -------------------------------------------------
    @property
    def text(self) -> str:
        """The ops as text, e.g. ``push chunk:5 reset:3`` (empty for no ops)."""
        return " ".join(op.text for op in self.ops)

    @classmethod
    def parse(cls, window: int, text: str) -> "Case":
        """Inverse of :attr:`text` (commas also separate ops; a JSON op list is accepted too)."""
        text = text.strip()
        if text.startswith("["):
            try:
                return cls(window, _ops_from_json(json.loads(text)))
            except json.JSONDecodeError as e:
                raise OpError(f"ops: not valid JSON: {e}") from e
        return cls(window, _ops_from_text(text))

    def __str__(self) -> str:
        return f"window={self.window} ops: {self.text or '(none)'}"

    # -- the one JSON form -------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"window": self.window, "ops": [op.to_json() for op in self.ops]}

    @classmethod
    def from_json(cls, doc: Any) -> "Case":
        """Inverse of :meth:`to_json`; :class:`OpError` names what is wrong."""
        if not isinstance(doc, dict):
            raise OpError(f"a case is a JSON object with 'window' and 'ops', got {type(doc).__name__}")
        if "ops" not in doc:
            raise OpError("missing 'ops'")
        return cls(doc.get("window"), _ops_from_json(doc["ops"]))

    @property
    def id(self) -> str:
        """12 hex digits of the SHA-256 of the canonical JSON form: the seed id of this case."""
        canon = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:12]

    # -- structure -----------------------------------------------------------
    @property
    def tokens(self) -> int:
        return sum(op.tokens for op in self.ops)

    def streams(self) -> list[tuple[int, list[tuple[int, Op]]]]:
        """The case split at its resets: ``[(window, [(op index, op), ...]), ...]``, one entry per
        stream (the first runs before any reset); the resets themselves are not listed."""
        out: list[tuple[int, list[tuple[int, Op]]]] = [(self.window, [])]
        for i, op in enumerate(self.ops):
            if isinstance(op, Reset):
                out.append((op.window, []))
            else:
                out[-1][1].append((i, op))
        return out

    def bad_kinds(self) -> set[str]:
        """The kinds of the bad calls in this case (empty for a happy-path case)."""
        return {op.kind for op in self.ops if type(op) is Bad}

    def widest_window(self) -> int:
        return max([self.window] + [op.window for op in self.ops if isinstance(op, Reset)])

    def replace_ops(self, ops: Iterable[Op]) -> "Case":
        return Case(self.window, tuple(ops))
