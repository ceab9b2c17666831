"""The C ring's binding is its header: every declared function bound, status codes and strerror distinct."""

from __future__ import annotations

from impl import ring as R


def test_binding_declares_the_header():
    from impl._ring_build import cdef

    syms = R.header_symbols(cdef())
    assert syms == sorted(["ringkv_strerror", "ringkv_create", "ringkv_destroy", "ringkv_reset", "ringkv_push",
                           "ringkv_push_chunk", "ringkv_length", "ringkv_next_pos", "ringkv_window",
                           "ringkv_width", "ringkv_read", "ringkv_checksum", "ringkv_trace"])
    lib = R.api_backend().lib
    assert [lib.RINGKV_OK, lib.RINGKV_E_NULL, lib.RINGKV_E_RANGE] == [R.OK, R.E_NULL, R.E_RANGE]


def test_strerror_is_distinct_per_code():
    b = R.api_backend()
    texts = [b.ffi.string(b.lib.ringkv_strerror(c)) for c in range(8)]
    assert len(set(texts)) == 8
    assert b.ffi.string(b.lib.ringkv_strerror(99)) == b.ffi.string(b.lib.ringkv_strerror(-1))
