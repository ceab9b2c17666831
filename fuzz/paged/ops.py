"""The paged op language and :class:`PagedCase`, the test case of a paged cache.

A paged case is a pool configuration — window ``W``, block size ``B``, ``N`` blocks, payload width
``D`` (docs/paged.md) — and ops that name sequences ``s0, s1, ...`` (the protocol's integer ids
0, 1, ...). One text form and one JSON form each:

=====================  ===============================  ==========================================================
text                   JSON                             what the harness does
=====================  ===============================  ==========================================================
``+s0``                ``["add", 0]``                   ``add(0)``
``s0 push``            ``["push", 0]``                  ``append(0, n, key, value)``: one token at the next position
``s0 chunk:5``         ``["chunk", 0, 5]``              ``append_chunk`` of 5 tokens (0 is allowed)
``fork:s0>s1``         ``["fork", 0, 1]``               ``fork(0, 1)``: s1 starts with s0's history, sharing blocks
``free:s0``            ``["free", 0]``                  ``free(0)``
``batch:s0,s1``        ``["batch", [0, 1]]``            a ragged batch step: one token to each sequence, at its own
                                                        next position (``append_batch`` when the cache has it)
``admit:s2<s1:4``      ``["admit", 2, 1, 4]``           ``admit(2, s1's first 4 entries)`` -> hit ``L``; then the
                                                        harness appends entries ``L .. 3``
``admit:s2<s0:8#1``    ``["admit", 2, 0, 8, 1]``        the same under identity tag 1 (payloads do not depend on it)
``spec:s1:3-1``        ``["spec", 1, 3, 1]``            a speculative step: 3 draft tokens (one chunk), then
                                                        ``rollback(1, 1)`` withdraws the last of them
``preempt:s1``         ``["preempt", 1]``               ``free(1)``, then ``admit(1, its own history)`` under its
                                                        identity, then the rest appended
=====================  ===============================  ==========================================================

Payloads are not part of a case: the checker derives every entry from ``(lineage, position)``
(:mod:`fuzz.paged.oracle`), so a fork and an admit share their source's entries and a case reads as
its ops. A case must be *well formed*: every op names live sequences where it needs them and new
ones where it creates them, ``admit`` takes ``1 <= L <=`` the source's length, ``spec`` has
``k >= 1`` and ``0 <= r <= k``; :class:`PagedOpError` names the first op that is not. Which optional
ops a target takes (``fork``, ``admit``, ``rollback``, ``append_batch``) is the target's to say
(:meth:`fuzz.targets.paged.PagedTarget.accepts`). :attr:`PagedCase.id` hashes the canonical JSON form,
as :attr:`fuzz.ops.Case.id` does, so a paged seed's id is its content.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable, Iterator, Union

from fuzz.ops import OpError

from fuzz.config import BLOCK_BOUND, NUM_BLOCKS_BOUND  # noqa: E402,F401 - the one set of bounds (fuzz.config)
from fuzz.config import SEQUENCES_BOUND as MAX_SEQS  # noqa: E402 - the most sequences one case names


class PagedOpError(OpError):
    """A paged case or op that cannot be parsed or is not well formed; the message names the op."""


def _nat(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _seq(v: Any, what: str = "sequence") -> int:
    if not _nat(v) or v >= MAX_SEQS:
        raise PagedOpError(f"a {what} is an id 0 .. {MAX_SEQS - 1} (written s0 .. s{MAX_SEQS - 1}), got {v!r}")
    return v


@dataclass(frozen=True)
class Add:
    seq: int

    def __post_init__(self) -> None:
        _seq(self.seq)

    @property
    def text(self) -> str:
        return f"+s{self.seq}"

    def to_json(self) -> list:
        return ["add", self.seq]


@dataclass(frozen=True)
class Push:
    seq: int

    def __post_init__(self) -> None:
        _seq(self.seq)

    @property
    def text(self) -> str:
        return f"s{self.seq} push"

    def to_json(self) -> list:
        return ["push", self.seq]


@dataclass(frozen=True)
class Chunk:
    seq: int
    n: int

    def __post_init__(self) -> None:
        _seq(self.seq)
        if not _nat(self.n):
            raise PagedOpError(f"chunk takes a token count n >= 0, got {self.n!r}")

    @property
    def text(self) -> str:
        return f"s{self.seq} chunk:{self.n}"

    def to_json(self) -> list:
        return ["chunk", self.seq, self.n]


@dataclass(frozen=True)
class Fork:
    src: int
    dst: int

    def __post_init__(self) -> None:
        _seq(self.src, "fork source")
        _seq(self.dst, "fork destination")
        if self.src == self.dst:
            raise PagedOpError(f"fork:s{self.src}>s{self.dst} forks a sequence into itself")

    @property
    def text(self) -> str:
        return f"fork:s{self.src}>s{self.dst}"

    def to_json(self) -> list:
        return ["fork", self.src, self.dst]


@dataclass(frozen=True)
class Free:
    seq: int

    def __post_init__(self) -> None:
        _seq(self.seq)

    @property
    def text(self) -> str:
        return f"free:s{self.seq}"

    def to_json(self) -> list:
        return ["free", self.seq]


@dataclass(frozen=True)
class Batch:
    seqs: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.seqs, tuple):
            object.__setattr__(self, "seqs", tuple(self.seqs))
        if not self.seqs:
            raise PagedOpError("batch names at least one sequence")
        for s in self.seqs:
            _seq(s)
        if len(set(self.seqs)) != len(self.seqs):
            raise PagedOpError(f"batch:{','.join(f's{s}' for s in self.seqs)} names a sequence twice")

    @property
    def text(self) -> str:
        return "batch:" + ",".join(f"s{s}" for s in self.seqs)

    def to_json(self) -> list:
        return ["batch", list(self.seqs)]


@dataclass(frozen=True)
class Admit:
    dst: int
    src: int
    length: int
    identity: int | None = None

    def __post_init__(self) -> None:
        _seq(self.dst, "admitted sequence")
        _seq(self.src, "prompt source")
        if not _nat(self.length) or self.length < 1:
            raise PagedOpError(f"admit takes a prompt of L >= 1 entries, got {self.length!r}")
        if self.identity is not None and not _nat(self.identity):
            raise PagedOpError(f"an identity tag is an int >= 0, got {self.identity!r}")
        if self.dst == self.src:
            raise PagedOpError(f"admit:s{self.dst}<s{self.src} admits a sequence from itself (that is preempt:s{self.src})")

    @property
    def text(self) -> str:
        tag = "" if self.identity is None else f"#{self.identity}"
        return f"admit:s{self.dst}<s{self.src}:{self.length}{tag}"

    def to_json(self) -> list:
        out = ["admit", self.dst, self.src, self.length]
        return out if self.identity is None else out + [self.identity]


@dataclass(frozen=True)
class Spec:
    seq: int
    k: int
    r: int

    def __post_init__(self) -> None:
        _seq(self.seq)
        if not _nat(self.k) or self.k < 1 or not _nat(self.r) or self.r > self.k:
            raise PagedOpError(f"spec takes k >= 1 draft tokens and 0 <= r <= k rolled back, got k={self.k!r} "
                               f"r={self.r!r}")

    @property
    def text(self) -> str:
        return f"spec:s{self.seq}:{self.k}-{self.r}"

    def to_json(self) -> list:
        return ["spec", self.seq, self.k, self.r]


@dataclass(frozen=True)
class Preempt:
    seq: int

    def __post_init__(self) -> None:
        _seq(self.seq)

    @property
    def text(self) -> str:
        return f"preempt:s{self.seq}"

    def to_json(self) -> list:
        return ["preempt", self.seq]


PagedOp = Union[Add, Push, Chunk, Fork, Free, Batch, Admit, Spec, Preempt]
#: The optional protocol methods an op needs (a target without them cannot take it).
NEEDS = {Fork: "fork", Admit: "admit", Preempt: "admit", Spec: "rollback"}
#: The optional protocol methods of the paged protocol (``batch`` always runs: one ``append`` each without
#: ``append_batch``).
OPTIONAL = ("fork", "admit", "rollback", "append_batch")

_JSON_SHAPES = ('["add", s]', '["push", s]', '["chunk", s, n]', '["fork", src, dst]', '["free", s]',
                '["batch", [s, ...]]', '["admit", dst, src, L] or ["admit", dst, src, L, identity]',
                '["spec", s, k, r]', '["preempt", s]')


def op_from_json(raw: Any, index: int = 0) -> PagedOp:
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], str):
        raise PagedOpError(f"op #{index}: expected one of {', '.join(_JSON_SHAPES)}; got {raw!r}")
    kind, args = raw[0], raw[1:]
    shapes = {"add": (Add, 1, 1), "push": (Push, 1, 1), "chunk": (Chunk, 2, 2), "fork": (Fork, 2, 2),
              "free": (Free, 1, 1), "batch": (Batch, 1, 1), "admit": (Admit, 3, 4), "spec": (Spec, 3, 3),
              "preempt": (Preempt, 1, 1)}
    if kind not in shapes:
        raise PagedOpError(f"op #{index}: unknown paged op {kind!r}; ops: {', '.join(shapes)}")
    cls, lo, hi = shapes[kind]
    if not lo <= len(args) <= hi:
        raise PagedOpError(f"op #{index}: malformed {raw!r}; expected {_JSON_SHAPES[list(shapes).index(kind)]}")
    try:
        if cls is Batch:
            if not isinstance(args[0], list):
                raise PagedOpError(f"batch takes a list of sequence ids, got {args[0]!r}")
            return Batch(tuple(args[0]))
        return cls(*args)
    except PagedOpError as e:
        raise PagedOpError(f"op #{index}: {e}") from None
    except TypeError as e:
        raise PagedOpError(f"op #{index}: malformed {raw!r}: {e}") from None


_SEQ = r"s(\d+)"
_TEXT = [
    (re.compile(rf"^\+{_SEQ}$"), lambda m: Add(int(m[1]))),
    (re.compile(rf"^fork:{_SEQ}>{_SEQ}$"), lambda m: Fork(int(m[1]), int(m[2]))),
    (re.compile(rf"^free:{_SEQ}$"), lambda m: Free(int(m[1]))),
    (re.compile(rf"^batch:({_SEQ}(?:,{_SEQ})*)$"),
     lambda m: Batch(tuple(int(x[1:]) for x in m[1].split(",")))),
    (re.compile(rf"^admit:{_SEQ}<{_SEQ}:(\d+)(?:#(\d+))?$"),
     lambda m: Admit(int(m[1]), int(m[2]), int(m[3]), None if m[4] is None else int(m[4]))),
    (re.compile(rf"^spec:{_SEQ}:(\d+)-(\d+)$"), lambda m: Spec(int(m[1]), int(m[2]), int(m[3]))),
    (re.compile(rf"^preempt:{_SEQ}$"), lambda m: Preempt(int(m[1]))),
]
_SEQ_ONLY = re.compile(rf"^{_SEQ}$")
_CHUNK = re.compile(r"^chunk:(\d+)$")
_TEXT_HELP = ("write +sN, sN push, sN chunk:K, fork:sA>sB, free:sN, batch:sA,sB,..., admit:sD<sS:L[#ID], "
              "spec:sN:K-R or preempt:sN")


def ops_from_text(text: str) -> tuple[PagedOp, ...]:
    ops: list[PagedOp] = []
    toks = text.split()
    i = 0
    while i < len(toks):
        tok, where = toks[i], f"op #{len(ops)}"
        try:
            m = _SEQ_ONLY.match(tok)
            if m:  # "sN push" / "sN chunk:K"
                nxt = toks[i + 1] if i + 1 < len(toks) else None
                c = _CHUNK.match(nxt or "")
                if nxt == "push":
                    ops.append(Push(int(m[1])))
                elif c:
                    ops.append(Chunk(int(m[1]), int(c[1])))
                else:
                    raise PagedOpError(f"{tok} must be followed by push or chunk:K, got {nxt!r}")
                i += 2
                continue
            for rx, build in _TEXT:
                m = rx.match(tok)
                if m:
                    ops.append(build(m))
                    break
            else:
                raise PagedOpError(f"cannot parse {tok!r}; {_TEXT_HELP}")
        except PagedOpError as e:
            raise PagedOpError(f"{where}: {e}" if not str(e).startswith("op #") else str(e)) from None
        i += 1
    return tuple(ops)


def _count(name: str, v: Any, bound: int) -> int:
    if not _nat(v) or not 1 <= v <= bound:
        raise PagedOpError(f"'{name}' must be an int 1 .. {bound}, got {v!r}")
    return v


@dataclass(frozen=True)
class PagedCase:
    """A pool configuration and the ops that follow it (module docstring). Also answers what the
    campaign machinery asks of every case (``window``, ``tokens``, ``instance_count``, ...)."""

    window: int
    block_size: int
    num_blocks: int
    width: int
    ops: tuple[PagedOp, ...] = ()

    #: A paged case drives one pool (its sequences are the "instances"); the campaign's size order uses these.
    instances = ()
    instance_count = 1
    dtype = None
    paged = True

    def __post_init__(self) -> None:
        from fuzz.config import WIDTH_BOUND, WINDOW_BOUND

        _count("window", self.window, WINDOW_BOUND)
        _count("block_size", self.block_size, BLOCK_BOUND)
        _count("num_blocks", self.num_blocks, NUM_BLOCKS_BOUND)
        _count("width", self.width, WIDTH_BOUND)
        if not isinstance(self.ops, tuple):
            object.__setattr__(self, "ops", tuple(self.ops))
        for i, op in enumerate(self.ops):
            if not isinstance(op, (Add, Push, Chunk, Fork, Free, Batch, Admit, Spec, Preempt)):
                raise PagedOpError(f"op #{i}: {op!r} is not a paged op")
        self._walk()

    # -- well-formedness -------------------------------------------------
    def _walk(self) -> list[int]:
        """Check every op against the names and lengths before it; returns the tokens each op feeds."""
        n: dict[int, int] = {}
        fed = []
        for i, op in enumerate(self.ops):
            t = type(op)

            def live(s: int, why: str = "") -> None:
                if s not in n:
                    raise PagedOpError(f"op #{i} ({op.text}): s{s} is not live{why} (add, fork or admit it first)")

            def new(s: int) -> None:
                if s in n:
                    raise PagedOpError(f"op #{i} ({op.text}): s{s} is live already (free it first)")

            k = 0
            if t is Add:
                new(op.seq)
                n[op.seq] = 0
            elif t is Push or t is Chunk:
                live(op.seq)
                k = 1 if t is Push else op.n
                n[op.seq] += k
            elif t is Fork:
                live(op.src)
                new(op.dst)
                n[op.dst] = n[op.src]
            elif t is Free:
                live(op.seq)
                del n[op.seq]
            elif t is Batch:
                for s in op.seqs:
                    live(s)
                    n[s] += 1
                k = len(op.seqs)
            elif t is Admit:
                live(op.src)
                new(op.dst)
                if op.length > n[op.src]:
                    raise PagedOpError(f"op #{i} ({op.text}): s{op.src} has {n[op.src]} entries, fewer than the "
                                       f"prompt's {op.length}")
                n[op.dst] = k = op.length
            elif t is Spec:
                live(op.seq)
                n[op.seq] += op.k - op.r
                k = op.k
            elif t is Preempt:
                live(op.seq)
                k = n[op.seq]
            fed.append(k)
        return fed

    @cached_property
    def fed(self) -> tuple[int, ...]:
        """Tokens each op hands the cache (a chunk of k is k, an admit its prompt, a preempt the history)."""
        return tuple(self._walk())

    @property
    def tokens(self) -> int:
        return sum(self.fed)

    def needs(self) -> set[str]:
        """The optional protocol methods this case needs (:data:`NEEDS`)."""
        return {NEEDS[type(op)] for op in self.ops if type(op) in NEEDS}

    def well_formed(self, ops: Iterable[PagedOp]) -> "PagedCase | None":
        """This configuration with ``ops``, or ``None`` if they are not well formed (the reducer's filter)."""
        try:
            return PagedCase(self.window, self.block_size, self.num_blocks, self.width, tuple(ops))
        except PagedOpError:
            return None

    # -- what the campaign machinery asks of a case ---------------------------
    @property
    def threads(self) -> bool:
        """Always ``False``: a pool's sequences are driven from one thread (the paged protocol has no threaded
        form), so every target's threads path, engines' included, treats a paged case as it treats a stream."""
        return False

    def widest_window(self) -> int:
        return self.window

    def widest_payload(self) -> int:
        return self.width

    def instance_width(self, k: int) -> int:
        return self.width

    def bad_kinds(self) -> set[str]:
        return set()

    def replace_ops(self, ops: Iterable[PagedOp]) -> "PagedCase":
        return PagedCase(self.window, self.block_size, self.num_blocks, self.width, tuple(ops))

    def replace(self, **changes: Any) -> "PagedCase":
        fields = {"window": self.window, "block_size": self.block_size, "num_blocks": self.num_blocks,
                  "width": self.width, "ops": self.ops}
        fields.update(changes)
        return PagedCase(**fields)

    # -- the one text form -------------------------------------------------
    @property
    def text(self) -> str:
        return " ".join(op.text for op in self.ops)

    @property
    def header(self) -> str:
        return f"paged W={self.window} B={self.block_size} N={self.num_blocks} D={self.width}"

    def __str__(self) -> str:
        return f"{self.header} ops: {self.text or '(none)'}"

    @classmethod
    def parse(cls, text: str, *, window: int, block_size: int, num_blocks: int, width: int = 8) -> "PagedCase":
        """Inverse of :attr:`text` (a JSON op list is accepted too)."""
        text = text.strip()
        if text.startswith("["):
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as e:
                raise PagedOpError(f"ops: not valid JSON: {e}") from e
            ops = _ops_from_json(raw)
        else:
            ops = ops_from_text(text)
        return cls(window, block_size, num_blocks, width, ops)

    # -- the one JSON form -------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """``{"paged": {...}}``: what a seed file and a report hold (a ring case has ``window`` and ``ops``
        at the top instead, so the two never read as each other)."""
        return {"paged": {"window": self.window, "block_size": self.block_size, "num_blocks": self.num_blocks,
                          "width": self.width, "ops": [op.to_json() for op in self.ops]}}

    @classmethod
    def from_json(cls, doc: Any) -> "PagedCase":
        if isinstance(doc, dict) and "paged" in doc:
            doc = doc["paged"]
        if not isinstance(doc, dict):
            raise PagedOpError(f"a paged case is a JSON object with window, block_size, num_blocks, width and ops, "
                               f"got {type(doc).__name__}")
        extra = set(doc) - {"window", "block_size", "num_blocks", "width", "ops"}
        missing = {"window", "block_size", "num_blocks", "width", "ops"} - set(doc)
        if missing or extra:
            raise PagedOpError("a paged case has exactly window, block_size, num_blocks, width and ops"
                               + (f"; missing {', '.join(sorted(missing))}" if missing else "")
                               + (f"; unknown {', '.join(sorted(extra))}" if extra else ""))
        return cls(doc["window"], doc["block_size"], doc["num_blocks"], doc["width"], _ops_from_json(doc["ops"]))

    @property
    def id(self) -> str:
        """12 hex digits of the SHA-256 of the canonical JSON form (the seed id)."""
        canon = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:12]

    # -- reduction -------------------------------------------------------------
    def candidates(self) -> Iterator["PagedCase"]:
        """Every one-step smaller well-formed variant, simplest first: drop an op, shrink a chunk, a
        batch, an admit's prompt or a speculative step, fewer blocks, a narrower window or block."""
        ops = list(self.ops)
        for k in sorted({len(ops) // 4, len(ops) // 2, 3 * len(ops) // 4}):  # a failing prefix, found in a few runs
            c = self.well_formed(ops[:k]) if 0 < k < len(ops) else None
            if c is not None:
                yield c
        for s in sorted({s for op in ops for s in _names(op)}, reverse=True):  # a sequence's whole life
            c = self.well_formed([op for op in ops if s not in _names(op)])
            if c is not None and len(c.ops) < len(ops):
                yield c
        for i, op in enumerate(ops):  # one life of a sequence: from the op that creates it to its free
            if type(op) in (Add, Fork, Admit):
                s = op.seq if type(op) is Add else op.dst
                end = next((k for k in range(i + 1, len(ops)) if type(ops[k]) is Free and ops[k].seq == s), None)
                if end is not None:
                    c = self.well_formed([o for k, o in enumerate(ops) if not (i <= k <= end and s in _names(o))])
                    if c is not None:
                        yield c
        for i in range(len(ops)):
            c = self.well_formed(ops[:i] + ops[i + 1:])
            if c is not None:
                yield c
        for i, op in enumerate(ops):
            smaller: list[PagedOp] = []
            if type(op) is Chunk:
                smaller = [Chunk(op.seq, m) for m in sorted({0, op.n // 2, op.n - 1}) if 0 <= m < op.n]  # chunk:0: none
                if op.n == 1:
                    smaller.insert(0, Push(op.seq))
            elif type(op) is Batch and len(op.seqs) > 1:
                smaller = [Batch(op.seqs[:j] + op.seqs[j + 1:]) for j in range(len(op.seqs))]
            elif type(op) is Admit:
                smaller = [Admit(op.dst, op.src, m, op.identity) for m in sorted({1, op.length // 2, op.length - 1})
                           if 1 <= m < op.length]
            elif type(op) is Spec and op.k > 1:
                smaller = [Spec(op.seq, op.k - 1, min(op.r, op.k - 1))]
            for o in smaller:
                c = self.well_formed(ops[:i] + [o] + ops[i + 1:])
                if c is not None:
                    yield c
        for field, lo in (("num_blocks", 1), ("window", 1), ("block_size", 1), ("width", 1)):
            v = getattr(self, field)
            for m in sorted({lo, v // 2, v - 1}):
                if lo <= m < v:
                    yield self.replace(**{field: m})


def _names(op: PagedOp) -> tuple[int, ...]:
    """The sequences an op names."""
    if type(op) is Fork:
        return (op.src, op.dst)
    if type(op) is Admit:
        return (op.dst, op.src)
    if type(op) is Batch:
        return op.seqs
    return (op.seq,)


def _ops_from_json(raw: Any) -> tuple[PagedOp, ...]:
    if not isinstance(raw, list):
        raise PagedOpError(f"ops must be a list, got {type(raw).__name__}")
    return tuple(op_from_json(r, i) for i, r in enumerate(raw))


def is_paged(case: Any) -> bool:
    """Whether ``case`` is a paged case (else a ring :class:`fuzz.ops.Case`)."""
    return getattr(case, "paged", False) is True


def case_from_json(doc: Any):
    """A case of either kind from its JSON form: ``{"paged": ...}`` is a :class:`PagedCase`, anything else a
    ring :class:`fuzz.ops.Case` (the one dispatch seeds, reports and workers use)."""
    if isinstance(doc, dict) and "paged" in doc:
        return PagedCase.from_json(doc)
    from fuzz.ops import Case

    return Case.from_json(doc)
