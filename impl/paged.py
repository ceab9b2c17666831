"""``PagedC``: the C paged pool of ``csrc/pagedkv.h`` behind the Python paged protocol (DESIGN §4).

The same class drives the library compiled at install (cffi API mode, ``impl._pagedkv``) and any
shared library a user brings that implements ``pagedkv.h`` (cffi ABI mode,
:func:`load_paged_library`, for ``--target paged-c:PATH.so``): both are an
:class:`impl.ring.Backend` — an ``ffi`` plus a ``lib`` with the header's functions.

Every C status becomes a typed exception (a :class:`PagedKVError`, itself a ``ValueError``) whose
message names the offending value, so a failure reads as "position 7 is not the next position 5
of sequence 2", not as "error 6". What C cannot see (a key of the wrong length, chunk entries
whose positions are not consecutive) is refused here with the same exceptions, after the
sequence itself has been checked, so the order of checks is the header's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import numpy as np

from impl.errors import Unavailable
from impl.ring import Backend, LibraryError, load_checked  # LibraryError: what load_paged_library raises
from impl.ring import header_symbols as ring_header_symbols

INT64_MAX = 2**63 - 1

# pagedkv_status (csrc/pagedkv.h)
(OK, E_NULL, E_CONFIG, E_NOMEM, E_UNKNOWN_SEQ, E_DUPLICATE_SEQ, E_POSITION, E_EXHAUSTED, E_CAPACITY,
 E_RANGE) = range(10)


class PagedKVError(ValueError):
    """A pagedkv call returned an error status; ``code`` is the status, ``func`` the C function."""

    def __init__(self, message: str, code: int = E_NULL, func: str = "?"):
        super().__init__(message)
        self.code, self.func = code, func


class NullHandleError(PagedKVError):
    """A call before ``configure(...)`` created a pool, or a null pointer."""


class ConfigError(PagedKVError):
    """Window, block size, number of blocks or width < 1."""


class WidthError(ConfigError):
    """A key or value whose length is not the pool's width (refused before any C call)."""


class AllocationError(PagedKVError, MemoryError):
    """The pool or a sequence's record could not be allocated (nothing changed)."""


class UnknownSequenceError(PagedKVError, LookupError):
    """No sequence with this id."""


class DuplicateSequenceError(PagedKVError):
    """A sequence with this id exists already (``add``, ``fork``'s destination, ``admit``)."""


class PositionError(PagedKVError):
    """A position that is not the sequence's next one: a gap or a duplicate."""


class PoolExhaustedError(PagedKVError):
    """The op needs a free block and none is free (nothing changed: a chunk is all-or-nothing)."""


class CapacityError(PagedKVError):
    """A read buffer smaller than the result."""


class RangeError(PagedKVError):
    """A negative id or count, a block id outside the pool, an empty prompt, or int64 overflow."""


_ERRORS: dict[int, type[PagedKVError]] = {
    E_NULL: NullHandleError, E_CONFIG: ConfigError, E_NOMEM: AllocationError,
    E_UNKNOWN_SEQ: UnknownSequenceError, E_DUPLICATE_SEQ: DuplicateSequenceError,
    E_POSITION: PositionError, E_EXHAUSTED: PoolExhaustedError, E_CAPACITY: CapacityError,
    E_RANGE: RangeError,
}

_API: Backend | None = None


def api_backend() -> Backend:
    """The library compiled at install (``impl._pagedkv``); :class:`~impl.errors.Unavailable` if not built."""
    global _API
    if _API is None:
        try:
            from impl import _pagedkv  # built by setup.py from impl/_paged_build.py
        except ImportError as e:
            raise Unavailable(f"the C paged pool module impl._pagedkv is not built ({e}); "
                              "reinstall with a C compiler: pip install -e .") from e
        _API = Backend(_pagedkv.ffi, _pagedkv.lib, "impl._pagedkv")
    return _API


def header_symbols(cdef_text: str) -> list[str]:
    """The function names declared in the header's cffi region (what a library must export)."""
    return ring_header_symbols(cdef_text, "pagedkv_")


def load_paged_library(path: str | Path) -> Backend:
    """Load a shared library implementing ``pagedkv.h`` in cffi ABI mode, every symbol checked now
    (:func:`impl.ring.load_checked`)."""
    from impl._paged_build import cdef

    return load_checked(path, cdef, "pagedkv.h", "pagedkv_", "paged-c:")


F32 = np.dtype(np.float32)


def _int64(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {v!r}")
    v = int(v)
    if not -INT64_MAX - 1 <= v <= INT64_MAX:
        raise RangeError(f"{name} {v} does not fit in int64", E_RANGE, "-")
    return v


def _rows(name: str, x: Any, n: int, width: int) -> np.ndarray:
    """``x`` as a C-contiguous ``float32[n, width]`` (no copy when it already is one)."""
    if type(x) is np.ndarray and x.dtype == F32 and x.shape == (n, width) and x.flags.c_contiguous:
        return x
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    a = np.ascontiguousarray(x, dtype=np.float32)
    if a.shape != (n, width):
        raise WidthError(f"{name} has shape {a.shape}, want ({n}, {width}): {n} entries of the pool's width",
                         E_CONFIG, "-")
    return a


def _vec(name: str, x: Any, width: int) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.ascontiguousarray(x, dtype=np.float32)
    if a.ndim != 1 or a.shape[0] != width:
        raise WidthError(f"{name} has shape {a.shape}, the pool's width is {width}", E_CONFIG, "-")
    return a


def _stack(entries: list, i: int, width: int, what: str) -> np.ndarray:
    if not entries:
        return np.empty((0, width), dtype=np.float32)
    return np.stack([_vec(f"{what} of entry {k}", e[i], width) for k, e in enumerate(entries)])


class PagedC:
    """A ``pagedkv.h`` pool as a Python paged-protocol target, with array entry points.

    Built with no arguments (the protocol); ``backend=load_paged_library(path)`` drives another
    implementation of the header. ``configure`` creates the pool (a failed configure keeps the
    previous one). The ids of the live sequences are tracked here, from the ops that succeeded,
    so audits can visit every sequence (:meth:`sequences`).
    """

    def __init__(self, *, backend: Backend | None = None):
        self._b = backend if backend is not None else api_backend()
        self._ffi, self._lib = self._b.ffi, self._b.lib
        self._h = None
        self._cfg = (0, 0, 0, 0)
        self._live: set[int] = set()
        self._out = self._ffi.new("int64_t *")
        self._buffers = self._empty(0)

    # -- plumbing ---------------------------------------------------------
    def _fail(self, rc: int, func: str, detail: str) -> None:
        text = self._ffi.string(self._lib.pagedkv_strerror(rc)).decode(errors="replace")
        raise _ERRORS.get(rc, PagedKVError)(f"{func}: {detail} ({text}, status {rc})", rc, func)

    def _handle(self, func: str):
        if self._h is None:
            raise NullHandleError(f"{func}: no pool yet; call configure(window, block_size, num_blocks, width) "
                                  "first", E_NULL, func)
        return self._h

    def _empty(self, cap: int):
        d = self._cfg[3]
        return (np.empty(cap, dtype=np.int64), np.empty((cap, d), dtype=np.float32),
                np.empty((cap, d), dtype=np.float32))

    def _fb(self, ctype: str, a: np.ndarray):
        return self._ffi.from_buffer(ctype, a) if a.size else self._ffi.NULL

    def _seq_detail(self, rc: int, seq: int, what: str) -> str:
        """The detail of a status from an op on ``seq``: names the sequence and, for a position or
        exhaustion, its next position and the free blocks."""
        if rc == E_UNKNOWN_SEQ:
            return f"{what}: sequence {seq} does not exist"
        if rc == E_DUPLICATE_SEQ:
            return f"{what}: sequence {seq} already exists"
        if rc == E_RANGE and seq < 0:
            return f"{what}: sequence id {seq} is negative"
        if rc in (E_POSITION, E_EXHAUSTED):
            return (f"{what} (sequence {seq}'s next position is {self.length(seq)}; "
                    f"{self.free_blocks()} of {self._cfg[2]} blocks free)")
        return what

    def _check(self, rc: int, func: str, seq: int, what: str) -> None:
        if rc != OK:
            self._fail(rc, func, self._seq_detail(rc, seq, what))

    def _seq_ok(self, func: str, seq: int, must_exist: bool = True) -> None:
        """Raise what C would for ``seq`` itself (negative, unknown, or duplicate), before a Python-side
        check of the payload, so the order of checks is the header's."""
        rc = self._lib.pagedkv_length(self._handle(func), seq, self._out)
        if must_exist and rc != OK:
            self._check(rc, func, seq, f"sequence {seq}")
        if not must_exist and rc in (OK, E_RANGE):
            self._check(E_DUPLICATE_SEQ if rc == OK else rc, func, seq, f"sequence {seq}")

    # -- the paged protocol ------------------------------------------------
    def configure(self, window: int, block_size: int, num_blocks: int, width: int) -> None:
        """A new, empty pool (every sequence of the previous one is gone); an error keeps the old pool."""
        args = [_int64(n, v) for n, v in (("window", window), ("block_size", block_size),
                                            ("num_blocks", num_blocks), ("width", width))]
        out = self._ffi.new("pagedkv_t **")
        rc = self._lib.pagedkv_create(*args, out)
        if rc != OK:
            self._fail(rc, "pagedkv_create", "window {}, block_size {}, num_blocks {}, width {}".format(*args))
        self.close()
        self._h = self._ffi.gc(out[0], self._lib.pagedkv_destroy)
        self._cfg = tuple(args)
        self._live = set()
        self._buffers = self._empty(8)

    def add(self, seq: int) -> None:
        seq = _int64("sequence id", seq)
        self._check(self._lib.pagedkv_add(self._handle("pagedkv_add"), seq), "pagedkv_add", seq, "add")
        self._live.add(seq)

    def append(self, seq: int, pos: int, key: Any, value: Any) -> None:
        h = self._handle("pagedkv_append")
        seq, pos = _int64("sequence id", seq), _int64("position", pos)
        d = self._cfg[3]
        try:
            k, v = _vec("key", key, d), _vec("value", value, d)
        except WidthError:
            self._seq_ok("pagedkv_append", seq)
            raise
        fb = self._ffi.from_buffer
        rc = self._lib.pagedkv_append(h, seq, pos, fb("float[]", k), fb("float[]", v))
        self._check(rc, "pagedkv_append", seq, f"append at position {pos}")

    def append_chunk(self, seq: int, entries: Iterable[tuple[int, Any, Any]]) -> None:
        """``k >= 0`` entries at the sequence's next positions, all-or-nothing. Empty is a no-op."""
        entries = list(entries)
        seq = _int64("sequence id", seq)
        positions = np.array([_int64(f"position of entry {i}", e[0]) for i, e in enumerate(entries)],
                             dtype=np.int64)
        d = self._cfg[3]
        try:
            keys, vals = _stack(entries, 1, d, "key"), _stack(entries, 2, d, "value")
        except WidthError:
            self._seq_ok("pagedkv_append_chunk", seq)
            raise
        self.append_arrays(seq, positions, keys, vals)

    def fork(self, src: int, dst: int) -> None:
        src, dst = _int64("source sequence id", src), _int64("destination sequence id", dst)
        rc = self._lib.pagedkv_fork(self._handle("pagedkv_fork"), src, dst)
        if rc != OK:
            which = dst if rc == E_DUPLICATE_SEQ or (rc == E_RANGE and src >= 0) else src
            self._fail(rc, "pagedkv_fork", self._seq_detail(rc, which, f"fork {src} -> {dst}"))
        self._live.add(dst)

    def free(self, seq: int) -> None:
        seq = _int64("sequence id", seq)
        self._check(self._lib.pagedkv_free(self._handle("pagedkv_free"), seq), "pagedkv_free", seq, "free")
        self._live.discard(seq)

    def read(self, seq: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """The entries the next query of ``seq`` needs (positions ``max(0, n-W+1) .. n-1``), oldest first."""
        pos, keys, vals = self.read_arrays(seq)
        pos, keys, vals = pos.copy(), keys.copy(), vals.copy()
        return [(p, keys[i], vals[i]) for i, p in enumerate(pos.tolist())]

    def table(self, seq: int) -> list[int | None]:
        """Physical block per logical block (``None`` once freed)."""
        h = self._handle("pagedkv_table")
        seq = _int64("sequence id", seq)
        out = self._out
        self._check(self._lib.pagedkv_table(h, seq, 0, self._ffi.NULL, out), "pagedkv_table", seq, "table")
        n = int(out[0])
        buf = np.empty(n, dtype=np.int64)
        rc = self._lib.pagedkv_table(h, seq, n, self._fb("int64_t[]", buf) if n else self._ffi.new("int64_t[]", 1),
                                     out)
        self._check(rc, "pagedkv_table", seq, f"table of {n} entries")
        return [None if b < 0 else b for b in buf.tolist()]

    def free_blocks(self) -> int:
        rc = self._lib.pagedkv_free_blocks(self._handle("pagedkv_free_blocks"), self._out)
        if rc != OK:
            self._fail(rc, "pagedkv_free_blocks", "free_blocks")
        return int(self._out[0])

    def admit(self, seq: int, entries: Iterable[tuple[int, Any, Any]], identity: int = 0) -> int:
        """Create ``seq`` from the longest valid cached prefix of the prompt ``entries`` (positions
        ``0 .. m-1``, ``m >= 1``); returns the hit length ``L`` (the caller appends ``entries[L:]``)."""
        entries = list(entries)
        seq, identity = _int64("sequence id", seq), _int64("identity", identity)
        h = self._handle("pagedkv_admit")
        d = self._cfg[3]
        try:
            for i, e in enumerate(entries):
                p = _int64(f"position of entry {i}", e[0])
                if p != i:
                    raise PositionError(f"pagedkv_admit: prompt entry {i} has position {p}, expected {i} "
                                        "(a prompt starts at position 0, consecutive)", E_POSITION, "pagedkv_admit")
            keys, vals = _stack(entries, 1, d, "key"), _stack(entries, 2, d, "value")
        except (PositionError, WidthError):
            if entries:
                self._seq_ok("pagedkv_admit", seq, must_exist=False)
            raise
        m = len(entries)
        rc = self._lib.pagedkv_admit(h, seq, identity, m, self._fb("float[]", keys), self._fb("float[]", vals),
                                     self._out)
        if rc != OK:
            what = f"admit of a prompt of {m} entries" + (" (a prompt needs at least 1)" if m == 0 else "")
            self._fail(rc, "pagedkv_admit", self._seq_detail(rc, seq, what))
        self._live.add(seq)
        return int(self._out[0])

    # -- array entry points ----------------------------------------------------
    def append_arrays(self, seq: int, positions: Any, keys: Any, values: Any) -> None:
        """A chunk as arrays: ``positions`` ``int64[k]`` consecutive from the next position, ``keys`` /
        ``values`` ``float32[k, width]``; one ``pagedkv_append_chunk``. Empty is a no-op."""
        h = self._handle("pagedkv_append_chunk")
        seq = _int64("sequence id", seq)
        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        n, d = len(positions), self._cfg[3]
        first = int(positions[0]) if n else 0
        if n > 1 and not bool((np.diff(positions) == 1).all()):
            self._seq_ok("pagedkv_append_chunk", seq)
            bad = next(i for i in range(1, n) if int(positions[i]) != first + i)
            raise PositionError(f"pagedkv_append_chunk: entry {bad} has position {int(positions[bad])}, expected "
                                f"{first + bad} (chunk positions must be consecutive)", E_POSITION,
                                "pagedkv_append_chunk")
        if n == 0:
            k = v = np.empty((0, d), dtype=np.float32)
        else:
            try:
                k, v = _rows("keys", keys, n, d), _rows("values", values, n, d)
            except WidthError:
                self._seq_ok("pagedkv_append_chunk", seq)
                raise
        rc = self._lib.pagedkv_append_chunk(h, seq, first, n, self._fb("float[]", k), self._fb("float[]", v))
        self._check(rc, "pagedkv_append_chunk", seq, f"chunk of {n} entries from position {first}")

    def read_arrays(self, seq: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What :meth:`read` returns as positions, keys and values: views of buffers this object reuses
        (valid until its next read). A result larger than the buffers is read again with buffers of
        the size ``pagedkv_read`` reported, so an oversized read is seen, not refused."""
        h = self._handle("pagedkv_read")
        seq = _int64("sequence id", seq)
        buf = self._buffers
        cap = buf[0].shape[0]
        ffi, out = self._ffi, self._out
        ptr = (lambda ct, a: ffi.from_buffer(ct, a)) if cap else (lambda ct, a: ffi.NULL)
        rc = self._lib.pagedkv_read(h, seq, cap, ptr("int64_t[]", buf[0]), ptr("float[]", buf[1]),
                                    ptr("float[]", buf[2]), out)
        if rc == E_CAPACITY:
            self._buffers = self._empty(max(int(out[0]), 2 * cap, 8))
            return self.read_arrays(seq)
        self._check(rc, "pagedkv_read", seq, f"read with capacity {cap}")
        m = int(out[0])
        return buf[0][:m], buf[1][:m], buf[2][:m]

    # -- the rest of pagedkv.h -----------------------------------------------------
    def length(self, seq: int) -> int:
        """``n_seq``: the tokens the sequence has seen (its next position)."""
        seq = _int64("sequence id", seq)
        rc = self._lib.pagedkv_length(self._handle("pagedkv_length"), seq, self._out)
        self._check(rc, "pagedkv_length", seq, "length")
        return int(self._out[0])

    def identity(self, seq: int) -> int:
        seq = _int64("sequence id", seq)
        rc = self._lib.pagedkv_identity(self._handle("pagedkv_identity"), seq, self._out)
        self._check(rc, "pagedkv_identity", seq, "identity")
        return int(self._out[0])

    def refcount(self, block: int) -> int:
        """How many tables reference physical block ``block`` (0: it is free)."""
        block = _int64("block id", block)
        rc = self._lib.pagedkv_refcount(self._handle("pagedkv_refcount"), block, self._out)
        if rc != OK:
            self._fail(rc, "pagedkv_refcount", f"block {block} (the pool has blocks 0 .. {self._cfg[2] - 1})")
        return int(self._out[0])

    @property
    def config(self) -> tuple[int, int, int, int]:
        """``(window, block_size, num_blocks, width)`` as the library reports it."""
        outs = [self._ffi.new("int64_t *") for _ in range(4)]
        rc = self._lib.pagedkv_config(self._handle("pagedkv_config"), *outs)
        if rc != OK:
            self._fail(rc, "pagedkv_config", "config")
        return tuple(int(o[0]) for o in outs)

    def sequences(self) -> list[int]:
        """The ids of the live sequences (from the ops on this object that succeeded), ascending."""
        return sorted(self._live)

    def close(self) -> None:
        """Free the C pool now (otherwise it is freed when the object is collected)."""
        if self._h is not None:
            self._ffi.release(self._h)
            self._h = None
