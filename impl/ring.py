"""``CRing``: the C ring buffer of ``csrc/ringkv.h`` behind the Python target protocol.

The same class drives the library compiled at install (cffi API mode,
``impl._ringkv``, target ``ring-c``) and any shared library a user brings
that implements ``ringkv.h`` (cffi ABI mode, ``--target c:PATH.so``): both
are a :class:`Backend` — an ``ffi`` plus a ``lib`` with the header's functions.

Every C status code becomes a typed exception (a :class:`RingKVError`, itself
a ``ValueError``) whose message names the offending value, so a fuzz failure
reads as "position 7 is not the next position 5", not as "error 5".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from impl.errors import Unavailable

DEFAULT_WIDTH = 4
INT64_MAX = 2**63 - 1

# ringkv_status (csrc/ringkv.h)
OK, E_NULL, E_WINDOW, E_WIDTH, E_NOMEM, E_POSITION, E_CAPACITY, E_RANGE = range(8)


class RingKVError(ValueError):
    """A ringkv call returned an error status; ``code`` is the status, ``func`` the C function."""

    def __init__(self, message: str, code: int = E_NULL, func: str = "?"):
        super().__init__(message)
        self.code, self.func = code, func


class NullHandleError(RingKVError):
    """A call on a ring that does not exist yet (no ``reset(window)``) or a null pointer."""


class WindowError(RingKVError):
    """Window < 1 (or not representable as int64)."""


class WidthError(RingKVError):
    """Width < 1, or a key/value whose length is not the ring's width."""


class AllocationError(RingKVError, MemoryError):
    """The ring's memory could not be allocated (the previous stream, if any, is intact)."""


class PositionError(RingKVError):
    """A pushed position is not the next one: a gap or a duplicate."""


class CapacityError(RingKVError):
    """A read buffer smaller than the cache."""


class CountError(RingKVError):
    """A negative count, or positions that would overflow int64."""


_ERRORS: dict[int, type[RingKVError]] = {
    E_NULL: NullHandleError, E_WINDOW: WindowError, E_WIDTH: WidthError, E_NOMEM: AllocationError,
    E_POSITION: PositionError, E_CAPACITY: CapacityError, E_RANGE: CountError,
}


class LibraryError(RuntimeError):
    """A shared library that cannot serve as a ringkv backend; ``symbol`` names a missing function."""

    def __init__(self, message: str, symbol: str | None = None):
        super().__init__(message)
        self.symbol = symbol


@dataclass(frozen=True)
class Backend:
    """A cffi ``ffi`` and a ``lib`` exposing ``ringkv.h``; ``origin`` says where it came from."""

    ffi: Any
    lib: Any
    origin: str


_API: Backend | None = None


def api_backend() -> Backend:
    """The library compiled at install (``impl._ringkv``); :class:`~impl.errors.Unavailable` if it was not built."""
    global _API
    if _API is None:
        try:
            from impl import _ringkv  # built by setup.py from impl/_ring_build.py
        except ImportError as e:
            raise Unavailable(f"the C ring module impl._ringkv is not built ({e}); "
                              "reinstall with a C compiler: pip install -e .") from e

        _API = Backend(_ringkv.ffi, _ringkv.lib, "impl._ringkv")
    return _API


def header_symbols(cdef_text: str, prefix: str = "ringkv_") -> list[str]:
    """The function names declared in the header's cffi region (what a library must export)."""
    return sorted(set(re.findall(rf"\b({prefix}\w+)\s*\(", cdef_text)))


def load_checked(path: str | Path, cdef: Any, header: str, prefix: str, target: str) -> Backend:
    """Load a shared library implementing ``header`` (its cffi declarations: ``cdef()``) in cffi ABI mode,
    checking every ``prefix*`` symbol now (cffi would otherwise fail lazily, mid-campaign, on the first call of a
    missing function); ``target`` names the ``--target`` form in the error."""
    import cffi

    try:
        text = cdef()
    except OSError as e:
        raise LibraryError(f"cannot read the {header} declarations: {e}") from e
    ffi = cffi.FFI()
    ffi.cdef(text)
    try:
        lib = ffi.dlopen(str(path))
    except OSError as e:
        raise LibraryError(f"{path} is not a loadable shared library: {e}") from e
    for sym in header_symbols(text, prefix):
        try:
            getattr(lib, sym)
        except AttributeError:
            raise LibraryError(f"{path} does not export {sym} (a {target} target must implement every "
                               f"function of csrc/{header})", symbol=sym) from None
    return Backend(ffi, lib, str(path))


def load_library(path: str | Path) -> Backend:
    """Load a shared library implementing ``ringkv.h`` (:func:`load_checked`)."""
    from impl._ring_build import cdef

    return load_checked(path, cdef, "ringkv.h", "ringkv_", "c:")


def _int64(name: str, v: Any, err: type[RingKVError]) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {v!r}")
    v = int(v)
    if not -INT64_MAX - 1 <= v <= INT64_MAX:
        raise err(f"{name} {v} does not fit in int64", E_RANGE, "-")
    return v


F32 = np.dtype(np.float32)
I64 = np.dtype(np.int64)


def _vec(name: str, x: Any, width: int) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    a = np.ascontiguousarray(x, dtype=np.float32)
    if a.ndim != 1 or a.shape[0] != width:
        raise WidthError(f"{name} has shape {a.shape}, the ring's width is {width}", E_WIDTH, "-")
    return a


def _rows(name: str, x: Any, n: int, width: int) -> np.ndarray:
    """``x`` as a C-contiguous ``float32[n, width]`` (no copy when it already is one)."""
    if type(x) is np.ndarray and x.dtype == F32 and x.shape == (n, width) and x.flags.c_contiguous:
        return x
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    a = np.ascontiguousarray(x, dtype=np.float32)
    if a.shape != (n, width):
        raise WidthError(f"{name} has shape {a.shape}, want ({n}, {width}): {n} entries of the ring's width",
                         E_WIDTH, "-")
    return a


class CRing:
    """A ``ringkv.h`` ring as a Python-protocol cache (DESIGN §4), with an array entry point.

    ``width`` (floats per key and value) is fixed per object; the default 4 is
    what the fuzz campaign pushes. The C ring is created at the first
    ``reset(window)``; later resets go through ``ringkv_reset`` — the call
    under test for stale entries and window changes.

    The tuple protocol (``push_chunk(entries)``, ``contents()``) builds one Python
    object per entry; :meth:`push_arrays`, :meth:`read_into` and :meth:`read_arrays`
    hand whole arrays to ``ringkv_push_chunk`` / ``ringkv_read`` instead (what the
    campaign's op loop uses).
    """

    def __init__(self, width: int = DEFAULT_WIDTH, *, backend: Backend | None = None):
        width = _int64("width", width, WidthError)
        if width < 1:
            raise WidthError(f"width must be >= 1, got {width}", E_WIDTH, "CRing")
        self.width = width
        self._b = backend if backend is not None else api_backend()
        self._ffi, self._lib = self._b.ffi, self._b.lib
        self._h = None
        self._count = self._ffi.new("int64_t *")
        self._sum = self._ffi.new("uint64_t *")
        self._buffers = self._empty_buffers(8)

    # -- plumbing ---------------------------------------------------------
    def _fail(self, rc: int, func: str, detail: str) -> None:
        text = self._ffi.string(self._lib.ringkv_strerror(rc)).decode(errors="replace")
        cls = _ERRORS.get(rc, RingKVError)
        raise cls(f"{func}: {detail} ({text}, status {rc})", rc, func)

    def _handle(self, func: str):
        if self._h is None:
            raise NullHandleError(f"{func}: no ring yet; call reset(window) first", E_NULL, func)
        return self._h

    def _get(self, fn: str) -> int:
        out = self._ffi.new("int64_t *")
        rc = getattr(self._lib, fn)(self._handle(fn), out)
        if rc != OK:
            self._fail(rc, fn, "getter failed")
        return int(out[0])

    def _floats(self, a: np.ndarray):
        return self._ffi.from_buffer("float[]", a) if a.size else self._ffi.NULL

    def _empty_buffers(self, capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.empty(capacity, dtype=np.int64), np.empty((capacity, self.width), dtype=np.float32),
                np.empty((capacity, self.width), dtype=np.float32))

    # -- the target protocol ---------------------------------------------
    def reset(self, window: int) -> None:
        """Start a new stream; the window may differ from the last one."""
        window = _int64("window", window, WindowError)
        if self._h is None:
            out = self._ffi.new("ringkv_t **")
            rc = self._lib.ringkv_create(window, self.width, out)
            if rc != OK:
                self._fail(rc, "ringkv_create", f"window {window}, width {self.width}")
            self._h = self._ffi.gc(out[0], self._lib.ringkv_destroy)
            return
        rc = self._lib.ringkv_reset(self._h, window)
        if rc != OK:
            self._fail(rc, "ringkv_reset", f"window {window}")

    def push(self, pos: int, key: Any, value: Any) -> None:
        h = self._handle("ringkv_push")
        pos = _int64("position", pos, PositionError)
        k, v = _vec("key", key, self.width), _vec("value", value, self.width)
        fb = self._ffi.from_buffer
        rc = self._lib.ringkv_push(h, pos, fb("float[]", k), fb("float[]", v))
        if rc != OK:
            self._fail(rc, "ringkv_push", f"position {pos} (next position is {self.next_position()})")

    def push_chunk(self, entries: Iterable[tuple[int, Any, Any]]) -> None:
        """A prefill chunk; positions must be consecutive from the next position. Empty is a no-op."""
        h = self._handle("ringkv_push_chunk")
        entries = list(entries)
        if not entries:
            rc = self._lib.ringkv_push_chunk(h, 0, 0, self._ffi.NULL, self._ffi.NULL)
            if rc != OK:
                self._fail(rc, "ringkv_push_chunk", "empty chunk")
            return
        first = _int64("position of entry 0", entries[0][0], PositionError)
        for i, e in enumerate(entries):
            p = _int64(f"position of entry {i}", e[0], PositionError)
            if p != first + i:
                raise PositionError(f"ringkv_push_chunk: entry {i} has position {p}, expected {first + i}"
                                    " (chunk positions must be consecutive)", E_POSITION, "ringkv_push_chunk")
        keys = np.stack([_vec(f"key of entry {i}", e[1], self.width) for i, e in enumerate(entries)])
        vals = np.stack([_vec(f"value of entry {i}", e[2], self.width) for i, e in enumerate(entries)])
        rc = self._lib.ringkv_push_chunk(h, first, len(entries), self._floats(keys), self._floats(vals))
        if rc != OK:
            self._fail(rc, "ringkv_push_chunk",
                       f"first position {first}, {len(entries)} entries (next position is {self.next_position()})")

    def contents(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """The cache in logical order (oldest first); ``[]`` before the first reset."""
        if self._h is None:
            return []
        pos, keys, vals = self.read()
        return [(p, keys[i], vals[i]) for i, p in enumerate(pos.tolist())]

    # -- the array entry point ---------------------------------------------
    def push_arrays(self, positions: np.ndarray, keys: Any, values: Any) -> None:
        """A prefill chunk as arrays: ``positions`` ``int64[n]`` consecutive from the next position,
        ``keys`` / ``values`` ``float32[n, width]``; one ``ringkv_push_chunk``. Empty is a no-op."""
        h = self._handle("ringkv_push_chunk")
        n = len(positions)
        if n == 0:
            rc = self._lib.ringkv_push_chunk(h, 0, 0, self._ffi.NULL, self._ffi.NULL)
            if rc != OK:
                self._fail(rc, "ringkv_push_chunk", "empty chunk")
            return
        first = _int64("position of entry 0", positions[0], PositionError)
        if n > 1 and not (int(positions[-1]) - first == n - 1 and bool((np.diff(positions) == 1).all())):
            bad = next(i for i in range(1, n) if int(positions[i]) != first + i)
            raise PositionError(f"ringkv_push_chunk: entry {bad} has position {int(positions[bad])}, expected "
                                f"{first + bad} (chunk positions must be consecutive)", E_POSITION, "ringkv_push_chunk")
        k, v = _rows("keys", keys, n, self.width), _rows("values", values, n, self.width)
        fb = self._ffi.from_buffer
        rc = self._lib.ringkv_push_chunk(h, first, n, fb("float[]", k), fb("float[]", v))
        if rc != OK:
            self._fail(rc, "ringkv_push_chunk",
                       f"first position {first}, {n} entries (next position is {self.next_position()})")

    def read_into(self, positions: np.ndarray, keys: np.ndarray, values: np.ndarray) -> int:
        """``ringkv_read`` into the caller's arrays (``int64[c]``, ``float32[c, width]`` twice, C-contiguous;
        the capacity ``c`` is their length); returns how many entries it wrote, oldest first."""
        h = self._handle("ringkv_read")
        cap = positions.shape[0]
        if not (positions.dtype == I64 and positions.flags.c_contiguous and positions.ndim == 1):
            raise CapacityError(f"ringkv_read: positions buffer {positions.shape} {positions.dtype}, want a "
                                "C-contiguous int64 vector", E_CAPACITY, "ringkv_read")
        for name, a in (("keys", keys), ("values", values)):
            if not (a.dtype == F32 and a.shape == (cap, self.width) and a.flags.c_contiguous):
                raise CapacityError(f"ringkv_read: {name} buffer {a.shape} {a.dtype}, want C-contiguous float32 "
                                    f"({cap}, {self.width})", E_CAPACITY, "ringkv_read")
        fb, out = self._ffi.from_buffer, self._count
        rc = self._lib.ringkv_read(h, cap, fb("int64_t[]", positions), fb("float[]", keys), fb("float[]", values), out)
        if rc != OK:
            self._fail(rc, "ringkv_read", f"capacity {cap} (the cache holds {int(out[0])} entries)"
                       if rc == E_CAPACITY else f"capacity {cap}")
        return int(out[0])

    def read_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The cache in logical order as positions, keys and values: views of buffers this object
        reuses (valid until its next read). A cache holding more than the buffers fit is read again
        with buffers of the size ``ringkv_read`` reported, so an oversized cache is seen, not refused."""
        if self._h is None:
            return self._empty_buffers(0)
        buf = self._buffers
        cap = buf[0].shape[0]
        fb, out = self._ffi.from_buffer, self._count
        rc = self._lib.ringkv_read(self._h, cap, fb("int64_t[]", buf[0]), fb("float[]", buf[1]),
                                   fb("float[]", buf[2]), out)
        if rc == E_CAPACITY:
            self._buffers = self._empty_buffers(max(int(out[0]), 2 * cap, 8))
            return self.read_arrays()
        if rc != OK:
            self._fail(rc, "ringkv_read", f"capacity {cap}")
        m = int(out[0])
        return buf[0][:m], buf[1][:m], buf[2][:m]

    # -- the rest of ringkv.h ----------------------------------------------
    def read(self, capacity: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``ringkv_read`` into fresh arrays of ``capacity`` entries (default: the length)."""
        h = self._handle("ringkv_read")
        n = len(self) if capacity is None else _int64("capacity", capacity, CapacityError)
        cap = max(n, 0)
        pos, keys, vals = self._empty_buffers(cap)
        out = self._ffi.new("int64_t *")
        rc = self._lib.ringkv_read(h, n, self._ffi.cast("int64_t *", pos.ctypes.data),
                                   self._floats(keys), self._floats(vals), out)
        if rc != OK:
            self._fail(rc, "ringkv_read", f"capacity {n} (the cache holds {int(out[0])} entries)"
                       if rc == E_CAPACITY else f"capacity {n}")
        m = int(out[0])
        return pos[:m], keys[:m], vals[:m]

    def trace(self, keys: np.ndarray, values: np.ndarray,
              rows: np.ndarray | None = None, sums: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``ringkv_trace``: push ``len(keys)`` entries from the next position; returns the
        ``n x W`` logical positions after each push and the ``n`` checksums.
        ``rows``/``sums`` may be preallocated (C-contiguous int64 / uint64) to avoid allocation."""
        h = self._handle("ringkv_trace")
        w = self.window
        keys = np.ascontiguousarray(keys, dtype=np.float32)
        values = np.ascontiguousarray(values, dtype=np.float32)
        n = keys.shape[0]
        if keys.shape != (n, self.width) or values.shape != (n, self.width):
            raise WidthError(f"ringkv_trace: keys {keys.shape} / values {values.shape}, "
                             f"want ({n}, {self.width})", E_WIDTH, "ringkv_trace")
        if rows is None:
            rows = np.empty((n, w), dtype=np.int64)
        if sums is None:
            sums = np.empty(n, dtype=np.uint64)
        if rows.shape[0] < n or rows.shape[1:] != (w,) or rows.dtype != np.int64 or not rows.flags.c_contiguous:
            raise CapacityError(f"ringkv_trace: rows buffer {rows.shape} {rows.dtype}, want ({n}, {w}) int64",
                                E_CAPACITY, "ringkv_trace")
        if sums.shape[0] < n or sums.dtype != np.uint64 or not sums.flags.c_contiguous:
            raise CapacityError(f"ringkv_trace: checksum buffer {sums.shape} {sums.dtype}, want ({n},) uint64",
                                E_CAPACITY, "ringkv_trace")
        ffi = self._ffi
        rc = self._lib.ringkv_trace(h, n, self._floats(keys), self._floats(values),
                                    ffi.cast("int64_t *", rows.ctypes.data), ffi.cast("uint64_t *", sums.ctypes.data))
        if rc != OK:
            self._fail(rc, "ringkv_trace", f"{n} entries from position {self.next_position()}")
        return rows[:n], sums[:n]

    def c_handle(self) -> tuple[Any, Any, Any]:
        """``(ffi, lib, handle)`` for callers that batch their own C calls (``fuzz.targets.ring_bulk``)."""
        return self._ffi, self._lib, self._handle("c_handle")

    def checksum(self) -> int:
        out = self._sum
        rc = self._lib.ringkv_checksum(self._handle("ringkv_checksum"), out)
        if rc != OK:
            self._fail(rc, "ringkv_checksum", "checksum failed")
        return int(out[0])

    def __len__(self) -> int:
        return 0 if self._h is None else self._get("ringkv_length")

    def next_position(self) -> int:
        return 0 if self._h is None else self._get("ringkv_next_pos")

    @property
    def window(self) -> int:
        return self._get("ringkv_window")

    def close(self) -> None:
        """Free the C ring now (otherwise it is freed when the object is collected)."""
        if self._h is not None:
            self._ffi.release(self._h)
            self._h = None
