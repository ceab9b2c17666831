"""``CheckedPagedC``: :class:`impl.paged.PagedC` with the entry points the checker calls after every op
made cheap — ``read_arrays``, ``table_array``, ``free_blocks``, ``length``, ``refcount`` call the C
functions of ``pagedkv.h`` straight into buffers allocated once per pool (cffi pointers made once),
instead of converting every argument and wrapping every buffer per call.

Only the success path is short-cut: a call that returns any status but ``PAGEDKV_OK`` is made again
through :class:`~impl.paged.PagedC`'s own method, which raises its typed error (a capacity shortfall
grows the buffer first). The ops themselves (append, fork, admit, ...) are PagedC's, unchanged, so
what is fuzzed is exactly the binding users call. Measured by ``kvwindow bench --only paged``.
"""

from __future__ import annotations

import numpy as np

from impl.paged import OK, PagedC


class CheckedPagedC(PagedC):
    """PagedC plus fast, array-returning reads for the checker (module docstring)."""

    #: ``length`` is ``n_s`` and ``refcount`` the references to a block (``pagedkv.h``): the checker checks both.
    paged_queries = ("length", "refcount")

    def configure(self, window: int, block_size: int, num_blocks: int, width: int) -> None:
        super().configure(window, block_size, num_blocks, width)
        self._o = self._ffi.new("int64_t *")
        self._reads(max(1, int(window) - 1))
        self._tables(64)

    def _reads(self, cap: int) -> None:
        """One buffer for a read: positions (``int64[cap]``), then keys and values (``float32[cap, D]``), so a
        read of ``cap`` entries is one run of bytes (:meth:`read_blob`)."""
        d = self._cfg[3]
        self._blob = np.empty(8 * cap + 8 * cap * d, dtype=np.uint8)
        self._rp = self._blob[:8 * cap].view(np.int64)
        self._rk = self._blob[8 * cap:8 * cap + 4 * cap * d].view(np.float32).reshape(cap, d)
        self._rv = self._blob[8 * cap + 4 * cap * d:].view(np.float32).reshape(cap, d)
        fb = self._ffi.from_buffer
        self._rptr = (cap, fb("int64_t[]", self._rp), fb("float[]", self._rk), fb("float[]", self._rv))
        self.read_blob = self._read_blob_fn()

    def _read_blob_fn(self):
        """:meth:`read_blob` with everything it touches bound once (it runs for every live sequence after every op)."""
        call, h, o, blob = self._lib.pagedkv_read, self._h, self._o, self._blob
        cap, p, k, v = self._rptr
        rp, rk, rv = self._rp, self._rk, self._rv

        def read_blob(seq: int):
            if call(h, seq, cap, p, k, v, o) != OK:
                return None
            m = o[0]
            if m == cap:
                return blob.tobytes()
            return rp[:m].tobytes() + rk[:m].tobytes() + rv[:m].tobytes()

        return read_blob

    def _tables(self, cap: int) -> None:
        self._tb = np.empty(cap, dtype=np.int64)
        self._tptr = (cap, self._ffi.from_buffer("int64_t[]", self._tb))
        call, h, o, tb, t = self._lib.pagedkv_table, self._h, self._o, self._tb, self._tptr[1]

        def table_blob(seq: int):
            if call(h, seq, cap, t, o) != OK:
                return None
            return tb[:o[0]].tobytes()

        self.table_blob = table_blob

    def read_blob(self, seq: int):
        """The bytes of a successful read — positions, keys, values, concatenated — or ``None`` (then
        :meth:`read_arrays` says what went wrong)."""
        h = self._h
        if h is None:
            return None
        cap, p, k, v = self._rptr
        if self._lib.pagedkv_read(h, seq, cap, p, k, v, self._o) != OK:
            return None
        m = self._o[0]
        if m == cap:
            return self._blob.tobytes()
        return self._rp[:m].tobytes() + self._rk[:m].tobytes() + self._rv[:m].tobytes()

    def table_blob(self, seq: int):
        """The bytes of ``table_array(seq)``, or ``None`` (then :meth:`table_array` says what went wrong)."""
        h = self._h
        if h is None:
            return None
        cap, t = self._tptr
        if self._lib.pagedkv_table(h, seq, cap, t, self._o) != OK:
            return None
        return self._tb[:self._o[0]].tobytes()

    def read_arrays(self, seq: int):
        h = self._h
        if h is not None:
            cap, p, k, v = self._rptr
            if self._lib.pagedkv_read(h, seq, cap, p, k, v, self._o) == OK:
                m = self._o[0]
                return self._rp[:m], self._rk[:m], self._rv[:m]
            if self._o[0] > cap:  # a read longer than W - 1: seen, then judged by the checker
                self._reads(int(self._o[0]))
                return self.read_arrays(seq)
        return super().read_arrays(seq)

    def table_array(self, seq: int) -> np.ndarray:
        """``table(seq)`` as an ``int64`` array (``-1`` for none), a view of a buffer this object reuses."""
        h = self._h
        if h is not None:
            cap, t = self._tptr
            if self._lib.pagedkv_table(h, seq, cap, t, self._o) == OK:
                return self._tb[:self._o[0]]
            if self._o[0] > cap:
                self._tables(2 * int(self._o[0]))
                return self.table_array(seq)
        return np.array([-1 if b is None else b for b in super().table(seq)], dtype=np.int64)

    def free_blocks(self) -> int:
        if self._h is not None and self._lib.pagedkv_free_blocks(self._h, self._o) == OK:
            return self._o[0]
        return super().free_blocks()

    def length(self, seq: int) -> int:
        if self._h is not None and self._lib.pagedkv_length(self._h, seq, self._o) == OK:
            return self._o[0]
        return super().length(seq)

    def refcount(self, block: int) -> int:
        if self._h is not None and self._lib.pagedkv_refcount(self._h, block, self._o) == OK:
            return self._o[0]
        return super().refcount(block)

    def close(self) -> None:
        """Free the C pool; the bound fast paths go with it (they hold the handle)."""
        self.__dict__.pop("read_blob", None)
        self.__dict__.pop("table_blob", None)
        super().close()
