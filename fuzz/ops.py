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

A case may also drive **several live instances** of the same cache at once (two objects of one
class, two handles of one library): ``At(k, op)`` addresses instance ``k`` (text ``@1 push``,
JSON ``["@", 1, ["push"]]``); ops without an address go to instance 0. Instance ``k >= 1`` is
declared with its own window and payload width (:class:`Instance`); every instance has its own
stream, and after every op every instance must still match its own spec. A case also carries the
payload ``width`` (floats per key and value) and ``dtype`` of instance 0 when they were drawn or
pinned (``None``: the target's default), so a seed replays with the payloads it was found with.

A :class:`Case` has exactly one text form of its ops (``push chunk:5 reset:3``,
what ``seeds add --ops`` reads and every report prints) and one JSON form
(``{"window": 3, "ops": [["push"], ["chunk", 5], ["reset", 3]]}``, what seed
files store); its :attr:`Case.id` hashes the JSON form, so the same case found
twice is one seed. A single-instance case at the default payload has the JSON form it always had,
so the ids of older seeds never change.
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


#: The most live instances one case drives (the instance phase draws 2 or 3): the bound of fuzz.config.
from fuzz.config import INSTANCES_BOUND as MAX_INSTANCES  # noqa: E402


@dataclass(frozen=True)
class At:
    """``op`` sent to live instance ``instance >= 1`` of the case (instance 0's ops are never wrapped:
    :func:`at` returns them bare, so each case has one canonical form)."""

    instance: int
    op: "Op"

    def __post_init__(self) -> None:
        if not _nat(self.instance) or not 1 <= self.instance < MAX_INSTANCES:
            raise OpError(f"an instance address is an int 1..{MAX_INSTANCES - 1} (@0 is written bare), "
                          f"got {self.instance!r}")
        if isinstance(self.op, At):
            raise OpError("an op addresses one instance: @k @j op is not an op")

    @property
    def tokens(self) -> int:
        return self.op.tokens

    @property
    def text(self) -> str:
        return f"@{self.instance} {self.op.text}"

    def to_json(self) -> list:
        return ["@", self.instance, self.op.to_json()]


Op = Union[Push, Chunk, Reset, Bad, At]


def at(instance: int, op: Op) -> Op:
    """``op`` addressed to ``instance`` in its canonical form: bare for instance 0."""
    if isinstance(op, At):
        op = op.op
    return op if instance == 0 else At(instance, op)


def target_of(op: Op) -> tuple[int, Op]:
    """``(instance, bare op)`` of an op of a case."""
    return (op.instance, op.op) if type(op) is At else (0, op)


@dataclass(frozen=True)
class Instance:
    """A live instance ``k >= 1`` of a case: the window its stream starts at and its payload width
    (``None``: the same as instance 0's)."""

    window: int
    width: int | None = None

    def __post_init__(self) -> None:
        if not _nat(self.window) or self.window < 1:
            raise OpError(f"an instance's 'window' must be an int >= 1, got {self.window!r}")
        if self.width is not None and (not _nat(self.width) or self.width < 1):
            raise OpError(f"an instance's 'width' must be an int >= 1, got {self.width!r}")

    @property
    def text(self) -> str:
        return f"{self.window}" + (f"x{self.width}" if self.width is not None else "")

    def to_json(self) -> dict[str, Any]:
        return {"window": self.window, **({"width": self.width} if self.width is not None else {})}

    @classmethod
    def from_json(cls, raw: Any, index: int) -> "Instance":
        if not isinstance(raw, dict) or "window" not in raw or set(raw) - {"window", "width"}:
            raise OpError(f"instance @{index}: expected {{\"window\": W, \"width\": N}}, got {raw!r}")
        return cls(raw["window"], raw.get("width"))

    @classmethod
    def parse(cls, text: str, index: int = 1) -> "Instance":
        """``"5"`` or ``"5x64"`` (window, or window x width): what ``seeds add --instance`` takes."""
        w, sep, width = text.strip().partition("x")
        if not w.isdigit() or (sep and not width.isdigit()):
            raise OpError(f"instance @{index}: expected WINDOW or WINDOWxWIDTH (e.g. 5 or 5x64), got {text!r}")
        return cls(int(w), int(width) if sep else None)


class OpError(ValueError):
    """A case or op list that cannot be parsed; the message names the op and its index."""


def _nat(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def op_from_json(raw: Any, index: int = 0) -> Op:
    """Parse ``["push"]``, ``["chunk", n]``, ``["reset", w]`` or ``["bad", kind]``."""
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
        raise OpError(f"op #{index}: expected [\"push\"], [\"chunk\", n], [\"reset\", w], [\"bad\", kind] "
                      f"or [\"@\", k, op], got {raw!r}")
    kind, args = raw[0], raw[1:]
    if kind == "@":
        if len(args) != 2 or not _nat(args[0]):
            raise OpError(f"op #{index}: an addressed op is [\"@\", k, op], got {raw!r}")
        if args[0] == 0:
            raise OpError(f"op #{index}: instance 0's ops are written bare, not [\"@\", 0, ...]: {raw!r}")
        inner = op_from_json(args[1], index)
        if type(inner) is At:
            raise OpError(f"op #{index}: an op addresses one instance, got {raw!r}")
        return At(args[0], inner)
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
    instance: int | None = None  # an @k read, waiting for its op
    for tok in text.replace(",", " ").split():
        i = len(ops)
        if tok.startswith("@"):
            if instance is not None or not tok[1:].isdigit():
                raise OpError(f"op #{i}: cannot parse {tok!r}; an address is @K before one op (e.g. @1 push)")
            instance = int(tok[1:])
            if not 0 <= instance < MAX_INSTANCES:
                raise OpError(f"op #{i}: instance {instance} is beyond the {MAX_INSTANCES} a case can drive")
            continue
        name, _, arg = tok.partition(":")
        if name == "push" and not arg:
            op: Op = Push()
        elif name in ("chunk", "reset") and arg.isdigit():
            op = op_from_json([name, int(arg)], i)
        elif name == "bad" and arg:
            op = op_from_json([name, arg], i)
        else:
            raise OpError(f"op #{i}: cannot parse {tok!r}; write push, chunk:N, reset:W or bad:KIND, "
                          "optionally after @K (the instance it goes to)")
        ops.append(at(instance or 0, op))
        instance = None
    if instance is not None:
        raise OpError(f"op #{len(ops)}: @{instance} at the end addresses no op")
    return tuple(ops)


#: The payload dtypes a case may name (the same as :data:`fuzz.config.DTYPES`, kept here so ops import nothing).
CASE_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Case:
    """A window and the ops that follow it: what a campaign generates, a target runs, a failure
    reports and a seed stores. ``width``/``dtype``: instance 0's payload (``None``: the target's
    default); ``instances``: the live instances ``1 ..`` the case also drives (:class:`Instance`);
    ``threads``: each instance's ops run in a thread of its own, all at once (a race between handles), instead
    of interleaved op by op in one thread (:meth:`fuzz.targets.cache.CacheTarget.run`)."""

    window: int
    ops: tuple[Op, ...] = ()
    width: int | None = None
    dtype: str | None = None
    instances: tuple[Instance, ...] = ()
    threads: bool = False

    def __post_init__(self) -> None:
        if not _nat(self.window) or self.window < 1:
            raise OpError(f"'window' must be an int >= 1, got {self.window!r}")
        if not isinstance(self.ops, tuple):
            object.__setattr__(self, "ops", tuple(self.ops))
        if not isinstance(self.instances, tuple):
            object.__setattr__(self, "instances", tuple(self.instances))
        if self.width is not None and (not _nat(self.width) or self.width < 1):
            raise OpError(f"'width' must be an int >= 1, got {self.width!r}")
        if self.dtype is not None and self.dtype not in CASE_DTYPES:
            raise OpError(f"'dtype' must be one of {', '.join(CASE_DTYPES)}, got {self.dtype!r}")
        if self.threads is not False and (self.threads is not True or not self.instances):
            raise OpError(f"'threads' needs 2 or more instances (one thread each), got threads={self.threads!r} "
                          f"with {1 + len(self.instances)} instance(s)")
        if 1 + len(self.instances) > MAX_INSTANCES:
            raise OpError(f"a case drives at most {MAX_INSTANCES} instances, got {1 + len(self.instances)}")
        for i, op in enumerate(self.ops):
            if type(op) is At and op.instance > len(self.instances):
                raise OpError(f"op #{i} ({op.text}) addresses instance {op.instance}, but the case declares "
                              f"{len(self.instances)} besides instance 0")

    # -- the one text form -------------------------------------------------
    @property
    def text(self) -> str:
        """The ops as text, e.g. ``push chunk:5 reset:3`` (empty for no ops); with several instances
        every op carries its address (``@0 push @1 chunk:5``)."""
        if not self.instances:
            return " ".join(op.text for op in self.ops)
        return " ".join(op.text if type(op) is At else f"@0 {op.text}" for op in self.ops)

    @classmethod
    def parse(cls, window: int, text: str, *, width: int | None = None, dtype: str | None = None,
              instances: Iterable[Instance] = ()) -> "Case":
        """Inverse of :attr:`text` (commas also separate ops; a JSON op list is accepted too)."""
        text = text.strip()
        if text.startswith("["):
            try:
                ops = _ops_from_json(json.loads(text))
            except json.JSONDecodeError as e:
                raise OpError(f"ops: not valid JSON: {e}") from e
        else:
            ops = _ops_from_text(text)
        return cls(window, ops, width, dtype, tuple(instances))

    @property
    def header(self) -> str:
        """Everything but the ops: ``window=3 width=64 dtype=float16 @1=5x8``."""
        parts = [f"window={self.window}"]
        if self.width is not None:
            parts.append(f"width={self.width}")
        if self.dtype is not None:
            parts.append(f"dtype={self.dtype}")
        parts += [f"@{k}={inst.text}" for k, inst in enumerate(self.instances, 1)]
        if self.threads:
            parts.append(f"threads={self.instance_count}")
        return " ".join(parts)

    def __str__(self) -> str:
        return f"{self.header} ops: {self.text or '(none)'}"

    # -- the one JSON form -------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"window": self.window}
        if self.width is not None:
            doc["width"] = self.width
        if self.dtype is not None:
            doc["dtype"] = self.dtype
        if self.instances:
            doc["instances"] = [inst.to_json() for inst in self.instances]
        if self.threads:
            doc["threads"] = self.instance_count  # the thread count: one per instance
        doc["ops"] = [op.to_json() for op in self.ops]
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> "Case":
        """Inverse of :meth:`to_json`; :class:`OpError` names what is wrong."""
        if not isinstance(doc, dict):
            raise OpError(f"a case is a JSON object with 'window' and 'ops', got {type(doc).__name__}")
        if "ops" not in doc:
            raise OpError("missing 'ops'")
        raw = doc.get("instances", [])
        if not isinstance(raw, list):
            raise OpError(f"'instances' must be a list, got {type(raw).__name__}")
        instances = tuple(Instance.from_json(r, k) for k, r in enumerate(raw, 1))
        threads = doc.get("threads", 0)
        if threads and (not _nat(threads) or threads != 1 + len(instances)):
            raise OpError(f"'threads' is the number of instances, one thread each ({1 + len(instances)}), "
                          f"got {threads!r}")
        return cls(doc.get("window"), _ops_from_json(doc["ops"]), doc.get("width"), doc.get("dtype"), instances,
                   bool(threads))

    @property
    def id(self) -> str:
        """12 hex digits of the SHA-256 of the canonical JSON form: the seed id of this case."""
        canon = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:12]

    # -- structure -----------------------------------------------------------
    @property
    def tokens(self) -> int:
        return sum(op.tokens for op in self.ops)

    @property
    def instance_count(self) -> int:
        return 1 + len(self.instances)

    def instance_window(self, k: int) -> int:
        return self.window if k == 0 else self.instances[k - 1].window

    def instance_width(self, k: int) -> int | None:
        """Instance ``k``'s payload width (``None``: the target's default)."""
        if k == 0:
            return self.width
        own = self.instances[k - 1].width
        return self.width if own is None else own

    def instance_case(self, k: int) -> "Case":
        """Instance ``k``'s ops alone, as a single-instance case (op indices are not kept)."""
        ops = tuple(bare for i, bare in (target_of(op) for op in self.ops) if i == k)
        return Case(self.instance_window(k), ops, self.instance_width(k), self.dtype)

    def streams(self) -> list[tuple[int, list[tuple[int, Op]]]]:
        """Instance 0's ops split at its resets: ``[(window, [(op index, op), ...]), ...]``, one entry
        per stream (the first runs before any reset); the resets themselves are not listed."""
        out: list[tuple[int, list[tuple[int, Op]]]] = [(self.window, [])]
        for i, op in enumerate(self.ops):
            if type(op) is At:
                continue
            if isinstance(op, Reset):
                out.append((op.window, []))
            else:
                out[-1][1].append((i, op))
        return out

    def bad_kinds(self) -> set[str]:
        """The kinds of the bad calls in this case (empty for a happy-path case)."""
        return {bare.kind for bare in (target_of(op)[1] for op in self.ops) if type(bare) is Bad}

    def widest_window(self) -> int:
        windows = [self.window] + [inst.window for inst in self.instances]
        return max(windows + [bare.window for bare in (target_of(op)[1] for op in self.ops)
                              if isinstance(bare, Reset)])

    def widest_payload(self) -> int | None:
        """The widest payload width any instance names (``None``: all take the target's default)."""
        named = [w for w in (self.instance_width(k) for k in range(self.instance_count)) if w is not None]
        return max(named) if named else None

    def replace_ops(self, ops: Iterable[Op]) -> "Case":
        return Case(self.window, tuple(ops), self.width, self.dtype, self.instances, self.threads)

    def replace(self, **changes: Any) -> "Case":
        fields = {"window": self.window, "ops": self.ops, "width": self.width, "dtype": self.dtype,
                  "instances": self.instances, "threads": self.threads}
        fields.update(changes)
        return Case(**fields)

    def without_instance(self, k: int) -> "Case":
        """This case with instance ``k >= 1`` and its ops dropped (later instances renumbered)."""
        if not 1 <= k <= len(self.instances):
            raise OpError(f"no instance {k} to drop")
        ops = []
        for op in self.ops:
            i, bare = target_of(op)
            if i != k:
                ops.append(at(i - 1 if i > k else i, bare))
        instances = self.instances[:k - 1] + self.instances[k:]
        return Case(self.window, tuple(ops), self.width, self.dtype, instances, self.threads and bool(instances))
