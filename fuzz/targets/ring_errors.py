"""The error contract: bad calls (``bad:KIND`` ops) must be refused as documented and change nothing.

``csrc/ringkv.h`` promises that every call returns a status, that a call that
returns an error changes nothing, and names the error of each bad input. A
campaign of a C target interleaves :data:`C_KINDS` bad calls with its normal ops
(:func:`fuzz.strategies.op_lists`, and one error tour per campaign); for each,
:class:`CContract` sends the calls straight to the library (no Python wrapper
validates first), checks each status, and checks that length, next position,
window, width and checksum after every call are what they were; the op loop's
check after the op then compares the contents and the checksum with the spec.
What they were is the spec's: the check after the previous op verified the
contents and the checksum, and the getters are compared with the spec before the
first call (so no bad op reads the whole ring twice). A wrong status or any
change is a :class:`~fuzz.targets.base.Mismatch` of that op, so it shrinks and
saves like any other finding.

A Python cache whose class declares ``validates_positions = True`` (DESIGN §4)
promises that a push or chunk at a position other than the next one raises and
changes nothing: :class:`PyContract` sends :data:`PY_KINDS` and requires the
raise; the op loop's contents check after the op requires the nothing-changed.
A cache that implements its own bad calls (the CUDA ring's host API) exposes
``bad_call(kind, spec)`` and is driven through :class:`MethodContract`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fuzz.oracle import SpecStream

INT64_MAX = 2**63 - 1
INT64_MIN = -2**63

#: What every target that validates positions can take (push and chunk at a wrong position).
POSITION_KINDS = ("gap", "dup", "past", "chunk-gap", "chunk-dup")
#: Python caches also get a chunk whose first entry is right and whose second is not.
PY_KINDS = POSITION_KINDS + ("chunk-skip",)
#: Every documented error of ``csrc/ringkv.h`` (a C chunk has one first position: no ``chunk-skip``).
C_KINDS = POSITION_KINDS + ("count", "overflow", "null-handle", "null-data", "read-cap0", "read-short",
                            "reset-0", "reset-neg", "reset-huge")

# ringkv_status (csrc/ringkv.h), named here as the header names them
OK, E_NULL, E_WINDOW, E_WIDTH, E_NOMEM, E_POSITION, E_CAPACITY, E_RANGE = range(8)
STATUS = {OK: "RINGKV_OK", E_NULL: "RINGKV_E_NULL", E_WINDOW: "RINGKV_E_WINDOW", E_WIDTH: "RINGKV_E_WIDTH",
          E_NOMEM: "RINGKV_E_NOMEM", E_POSITION: "RINGKV_E_POSITION", E_CAPACITY: "RINGKV_E_CAPACITY",
          E_RANGE: "RINGKV_E_RANGE"}


def bad_positions(kind: str, spec: SpecStream) -> list[int]:
    """The positions a position kind pushes, from the next position ``n`` and the window ``W``."""
    n, w = spec.n, spec.window
    return {"gap": [n + 1], "dup": [n - 1], "past": [n + w], "chunk-gap": [n + 1, n + 2],
            "chunk-dup": [n - 1, n], "chunk-skip": [n, n + 2]}[kind]


def _status(rc: int) -> str:
    return STATUS.get(rc, f"status {rc}")


# ---------------------------------------------------------------------------
# C: the whole header


@dataclass
class _Call:
    text: str                  #: the call as C, e.g. ``ringkv_push(r, 8, key, value)``
    run: Callable[[], int]     #: makes the call, returns its status
    want: tuple[int, ...]      #: the statuses the header allows
    check: Callable[[], str | None] | None = None  #: after the call: outputs the header promises


class CContract:
    """The bad calls of ``csrc/ringkv.h``, sent to a :class:`impl.ring.CRing`'s library directly."""

    kinds = C_KINDS

    def check(self, raw: Any, cache: Any, spec: SpecStream, kind: str) -> str | None:
        ffi, lib, h = raw.c_handle()
        width = raw.width
        state = _CState(ffi, lib, h)
        light = state.light()
        if isinstance(light, str):
            return light
        want = (len(spec.positions()), spec.n, spec.window, width)
        if light[:4] != want:
            return (f"before bad:{kind}: length, next position, window, width = {light[:4]}, "
                    f"spec {want}")
        for call in _c_calls(kind, ffi, lib, h, spec, width):
            rc = call.run()
            if rc not in call.want:
                return (f"{call.text} returned {_status(rc)}, ringkv.h says "
                        f"{' or '.join(_status(s) for s in call.want)}")
            if call.check is not None:
                problem = call.check()
                if problem is not None:
                    return f"{call.text}: {problem}"
            now = state.light()
            if isinstance(now, str):
                return f"after {call.text}: {now}"
            if now != light:
                return (f"{call.text} returned {_status(rc)} but changed the ring: (length, next position, "
                        f"window, width, checksum) {light} -> {now}")
        return None


class _CState:
    """The ring's observable state through the header's own getters."""

    def __init__(self, ffi: Any, lib: Any, h: Any):
        self.ffi, self.lib, self.h = ffi, lib, h
        self.i64 = ffi.new("int64_t *")
        self.u64 = ffi.new("uint64_t *")

    def light(self) -> tuple | str:
        """``(length, next position, window, width, checksum)``, or what failed."""
        out = []
        for fn in ("ringkv_length", "ringkv_next_pos", "ringkv_window", "ringkv_width"):
            rc = getattr(self.lib, fn)(self.h, self.i64)
            if rc != OK:
                return f"{fn} on a valid ring returned {_status(rc)}"
            out.append(int(self.i64[0]))
        rc = self.lib.ringkv_checksum(self.h, self.u64)
        if rc != OK:
            return f"ringkv_checksum on a valid ring returned {_status(rc)}"
        out.append(int(self.u64[0]))
        return tuple(out)


def _c_calls(kind: str, ffi: Any, lib: Any, h: Any, spec: SpecStream, width: int) -> list[_Call]:
    """The calls one kind sends; every one must return a status in ``want`` and change nothing."""
    n, w = spec.n, spec.window
    NULL = ffi.NULL
    length = len(spec.positions())
    # Two rows of payloads of no real stream, and output buffers big enough for any wrong write.
    _, keys, values = spec.bad_entries([n, n + 1])
    kp, vp = ffi.cast("float *", keys.ctypes.data), ffi.cast("float *", values.ctypes.data)
    rows = np.empty((2, w), np.int64)
    sums = np.empty(2, np.uint64)
    rp, sp = ffi.cast("int64_t *", rows.ctypes.data), ffi.cast("uint64_t *", sums.ctypes.data)
    i64, u64 = ffi.new("int64_t *"), ffi.new("uint64_t *")
    handle_out = ffi.new("ringkv_t **")

    def push(pos: int, k=kp, v=vp) -> _Call:
        return _Call(f"ringkv_push(r, {pos}, {'NULL' if k == NULL else 'key'}, {'NULL' if v == NULL else 'value'})",
                     lambda: lib.ringkv_push(h, pos, k, v), (E_POSITION,) if k != NULL and v != NULL else (E_NULL,))

    def chunk(first: int, count: int, want: tuple[int, ...], k=kp, v=vp) -> _Call:
        return _Call(f"ringkv_push_chunk(r, {first}, {count}, {'NULL' if k == NULL else 'keys'}, "
                     f"{'NULL' if v == NULL else 'values'})", lambda: lib.ringkv_push_chunk(h, first, count, k, v), want)

    def trace(count: int, want: tuple[int, ...], handle=h, k=kp, v=vp, r=rp, s=sp) -> _Call:
        args = ", ".join("NULL" if a == NULL else name for a, name in ((k, "keys"), (v, "values"), (r, "rows"),
                                                                        (s, "sums")))
        return _Call(f"ringkv_trace({'NULL' if handle == NULL else 'r'}, {count}, {args})",
                     lambda: lib.ringkv_trace(handle, count, k, v, r, s), want)

    if kind == "gap":
        return [push(n + 1)]
    if kind == "dup":
        return [push(n - 1)]
    if kind == "past":
        return [push(n + w)]
    if kind == "chunk-gap":
        return [chunk(n + 1, 2, (E_POSITION,))]
    if kind == "chunk-dup":
        return [chunk(n - 1, 2, (E_POSITION,))]
    if kind == "count":
        return [chunk(n, -1, (E_RANGE,)), trace(-1, (E_RANGE,)),
                _read(ffi, lib, h, -1, length, width, (E_RANGE, E_CAPACITY), check_len=False)]
    if kind == "overflow":
        if n == 0:  # every count fits from position 0: nothing to send (the state is still checked)
            return []
        big = INT64_MAX - n + 1  # positions n .. n + big - 1 would pass INT64_MAX
        return [chunk(n, big, (E_RANGE,)), trace(big, (E_RANGE,))]
    if kind == "null-handle":
        calls = [
            _Call(f"ringkv_push(NULL, {n}, key, value)", lambda: lib.ringkv_push(NULL, n, kp, vp), (E_NULL,)),
            _Call(f"ringkv_push_chunk(NULL, {n}, 1, keys, values)",
                  lambda: lib.ringkv_push_chunk(NULL, n, 1, kp, vp), (E_NULL,)),
            _Call(f"ringkv_reset(NULL, {w})", lambda: lib.ringkv_reset(NULL, w), (E_NULL,)),
            _Call("ringkv_checksum(NULL, &out)", lambda: lib.ringkv_checksum(NULL, u64), (E_NULL,)),
            trace(1, (E_NULL,), handle=NULL),
            _read(ffi, lib, NULL, length, length, width, (E_NULL,), check_len=False),
            _Call("ringkv_destroy(NULL)", lambda: lib.ringkv_destroy(NULL), (E_NULL,)),
            _Call(f"ringkv_create({w}, {width}, NULL)", lambda: lib.ringkv_create(w, width, NULL), (E_NULL,)),
        ]
        for fn in ("ringkv_length", "ringkv_next_pos", "ringkv_window", "ringkv_width"):
            calls.append(_Call(f"{fn}(NULL, &out)", lambda fn=fn: getattr(lib, fn)(NULL, i64), (E_NULL,)))
        return calls
    if kind == "null-data":
        calls = [push(n, k=NULL), push(n, v=NULL), chunk(n, 1, (E_NULL,), k=NULL), chunk(n, 1, (E_NULL,), v=NULL),
                 _Call("ringkv_checksum(r, NULL)", lambda: lib.ringkv_checksum(h, NULL), (E_NULL,)),
                 _read(ffi, lib, h, length, length, width, (E_NULL,), check_len=False, out_len=False),
                 trace(1, (E_NULL,), k=NULL), trace(1, (E_NULL,), v=NULL), trace(1, (E_NULL,), r=NULL),
                 trace(1, (E_NULL,), s=NULL)]
        for fn in ("ringkv_length", "ringkv_next_pos", "ringkv_window", "ringkv_width"):
            calls.append(_Call(f"{fn}(r, NULL)", lambda fn=fn: getattr(lib, fn)(h, NULL), (E_NULL,)))
        return calls
    if kind == "read-cap0":
        return [_read(ffi, lib, h, 0, length, width, (E_CAPACITY,) if length else (OK,))]
    if kind == "read-short":
        if length == 0:  # capacity -1: a negative count (or, as the header's E_CAPACITY reads, too small)
            return [_read(ffi, lib, h, -1, length, width, (E_RANGE, E_CAPACITY), check_len=False)]
        return [_read(ffi, lib, h, length - 1, length, width, (E_CAPACITY,))]
    if kind == "reset-0":
        return [_Call("ringkv_reset(r, 0)", lambda: lib.ringkv_reset(h, 0), (E_WINDOW,))]
    if kind == "reset-neg":
        return [_Call(f"ringkv_reset(r, {-w})", lambda: lib.ringkv_reset(h, -w), (E_WINDOW,)),
                _Call(f"ringkv_reset(r, {INT64_MIN})", lambda: lib.ringkv_reset(h, INT64_MIN), (E_WINDOW,))]
    if kind == "reset-huge":
        return [_Call(f"ringkv_reset(r, {INT64_MAX})", lambda: lib.ringkv_reset(h, INT64_MAX), (E_NOMEM,))]
    raise ValueError(f"bad:{kind} is not a C call kind; C kinds: {', '.join(C_KINDS)}")


#: What a read's buffers are filled with before a call that must not write them.
_SENTINEL_POS = -0x5EED
_SENTINEL_BITS = 0x7FC0DEAD  # a NaN no cache stores


def _read(ffi: Any, lib: Any, h: Any, capacity: int, length: int, width: int, want: tuple[int, ...], *,
          check_len: bool = True, out_len: bool = True) -> _Call:
    """``ringkv_read`` with ``capacity`` into sentinel-filled buffers one row longer than the cache:
    after a refusal the buffers must be untouched and (``check_len``) ``*out_len`` the length."""
    rows = length + 1
    pos = np.full(rows, _SENTINEL_POS, np.int64)
    keys = np.full((rows, width), _SENTINEL_BITS, np.uint32)
    values = keys.copy()
    out = ffi.new("int64_t *", -1)
    args = (ffi.cast("int64_t *", pos.ctypes.data), ffi.cast("float *", keys.ctypes.data),
            ffi.cast("float *", values.ctypes.data))
    text = f"ringkv_read({'NULL' if h == ffi.NULL else 'r'}, {capacity}, positions, keys, values, " \
           f"{'&out_len' if out_len else 'NULL'})"

    def run() -> int:
        return lib.ringkv_read(h, capacity, *args, out if out_len else ffi.NULL)

    def check() -> str | None:
        if want == (OK,):
            return None
        if not ((pos == _SENTINEL_POS).all() and (keys == _SENTINEL_BITS).all() and (values == _SENTINEL_BITS).all()):
            return "refused but wrote into the caller's buffers (ringkv.h: buffers untouched)"
        if check_len and int(out[0]) != length:
            return f"*out_len = {int(out[0])}, ringkv.h: the length needed, {length}"
        return None

    return _Call(text, run, want, check)


# ---------------------------------------------------------------------------
# Python: validates_positions


class PyContract:
    """A class with ``validates_positions = True``: a push or chunk at a wrong position must raise."""

    kinds = PY_KINDS

    def check(self, raw: Any, cache: Any, spec: SpecStream, kind: str) -> str | None:
        pos, keys, values = spec.bad_entries(bad_positions(kind, spec))
        if kind in ("gap", "dup", "past"):
            text = f"push({int(pos[0])}, ...) with next position {spec.n}"
            call: Callable[[], Any] = lambda: cache.push(int(pos[0]), keys[0], values[0])  # noqa: E731
        else:
            text = f"push_chunk(positions {pos.tolist()}) with next position {spec.n}"
            call = lambda: cache.push_arrays(pos, keys, values)  # noqa: E731
        try:
            call()
        except Exception:  # noqa: BLE001 - any exception is the refusal; the contents check follows
            return None
        return f"{text} was accepted; validates_positions = True promises it raises and changes nothing"


class MethodContract:
    """A cache that sends its own bad calls: ``raw.bad_call(kind, spec)`` returns a problem or ``None``."""

    def __init__(self, kinds: tuple[str, ...]):
        self.kinds = kinds

    def check(self, raw: Any, cache: Any, spec: SpecStream, kind: str) -> str | None:
        return raw.bad_call(kind, spec)


def py_contract_for(cls: Any) -> PyContract | None:
    """:class:`PyContract` when ``cls`` declares ``validates_positions = True`` (exactly ``True``)."""
    return PyContract() if getattr(cls, "validates_positions", False) is True else None
