"""Paged mutants: the paged bug classes of DESIGN §5 as one edit each in a copy of a real pool.

* ``paged-c``: ``csrc/pagedkv.c`` (or ``csrc/pagedkv_index.h``) with one edit, compiled by
  :func:`impl._paged_build.compile_paged_library` into the mutant cache directory (built once per
  edit and source); the library speaks ``pagedkv.h``, so it runs as a ``paged-c:`` target;
* ``py-paged``: :class:`impl.mutants.paged_pool.BlockPool` with one edit — for the class the C ABI
  cannot express (a batch step: ``pagedkv.h`` has no batch call).

An edit's ``old`` text must occur exactly once in the current source (a refactored pool makes the
mutant fail loudly, never fuzz the unmodified code). Each names its bug class and a public report of
the same mistake. The harness wraps them (:mod:`fuzz.targets.mutants`): ``mutant:NAME`` targets of
kind ``paged``.
"""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path
from typing import Any

from impl.mutants.base import Mutant, MutantError, MutantUnavailable, apply_edit, cache_dir

# -- public reports of the same mistakes -------------------------------------------------------------
SWA_BLOCKS = "https://github.com/vllm-project/vllm/pull/17398"  # window 4, block 2: the hit needs 2 blocks
SWA_LEAK = "https://github.com/mybigday/llama.rn/issues/396"  # positions vs cache cells: KV-cell leak on iSWA
BEAM_COW = "https://github.com/NVIDIA/TensorRT-LLM/pull/14945"  # the partial context tail copied per beam
DOUBLE_FREE = "https://github.com/vllm-project/vllm/issues/42571"  # ref_cnt accounting: a block freed twice
STALE_TABLE = "https://github.com/vllm-project/vllm/issues/42273"  # SWA eviction leaves stale block table entries
LORA_HASH = "https://github.com/vllm-project/vllm/issues/3264"  # prefix caching shared across LoRA adapters
BATCH_POS = "https://github.com/rasbt/reasoning-from-scratch/issues/33"  # positions computed once per batch
NARROW_COUNTER = "https://github.com/slsdetectorgroup/slsDetectorPackage/issues/240"  # an index from a 16-bit counter
FIXED_TABLE = "https://github.com/gittensor-ai-lab/sparkinfer/issues/33"  # a fixed-width table overruns a neighbour's

#: name -> (bug class, reference, description, file, old, new)
PAGED_C_EDITS: dict[str, tuple[str, str, str, str, str, str]] = {
    "paged-free-first-needed": (
        "block freed while a future query needs it (n-W+1)", SWA_BLOCKS,
        "the rule releases a block once (j+1)B <= n-W+2: the block holding position n-W+1, which the next "
        "query attends to, is freed when that position is its last slot",
        "pagedkv_index.h", "  return pkv_first_needed(n, w) / b;\n}",
        "  return (pkv_first_needed(n, w) + 1) / b;\n}"),
    "paged-free-by-cache-length": (
        "freeing by cache length instead of position", SWA_LEAK,
        "the rule is evaluated at the cache length min(n, W-1) instead of the position n: nothing is ever "
        "released, the blocks leak (refcount 1, no table names them)",
        "pagedkv.c",
        "for (int64_t jj = pkv_first_kept_block(n, p->w, b); jj < pkv_first_kept_block(n + 1, p->w, b); jj++) {",
        "for (int64_t jj = pkv_first_kept_block(pkv_needed_len(n, p->w), p->w, b); "
        "jj < pkv_first_kept_block(pkv_needed_len(n + 1, p->w), p->w, b); jj++) {"),
    "paged-fork-no-cow": (
        "fork without copy-on-write of the partial last block", BEAM_COW,
        "an append into a shared partial block writes it in place: the fork's sibling reads the other's token",
        "pagedkv.c", "} else if (p->ref[*e] > 1) { /* copy on write: a shared block is never written */",
        "} else if (p->ref[*e] > 1 && 0) { /* mutant: no copy on write */"),
    "paged-fork-no-refcount": (
        "refcount not taken on fork", DOUBLE_FREE,
        "fork copies the table but not the references: the first sibling to release a shared block frees it "
        "while the other still reads it",
        "pagedkv.c", "    p->ref[tab_of(p, di)[pkv_ring_index(j, p->tcap)]]++;",
        "    (void)0; /* mutant: no reference taken */"),
    "paged-stale-table-entry": (
        "block reused without clearing its old table entry", STALE_TABLE,
        "the table reports a released logical block's old ring slot: once that physical block is reused for a "
        "later logical block, the table names it twice",
        "pagedkv.c", "blocks[j] = j < kept ? -1 : t[pkv_ring_index(j, p->tcap)];",
        "blocks[j] = j < kept && t[pkv_ring_index(j, p->tcap)] < 0 ? -1 : t[pkv_ring_index(j, p->tcap)];"),
    "paged-hit-skips-first-block": (
        "prefix hit that ignores the window's first block", SWA_BLOCKS,
        "admit checks the cached blocks of a hit's window from its second block on: a hit whose first needed "
        "block was evicted is taken, and that block is none in the table",
        "pagedkv.c",
        "    for (int64_t j = pkv_first_kept_block(c * b, p->w, b); j < c && ok; j++) ok = found[j] >= 0;\n"
        "    if (ok) hit = c;\n  }\n  const int64_t si = seq_insert(p, seq, hit * b, identity, chains[hit]);\n"
        "  int64_t *t = tab_of(p, si);\n  for (int64_t j = pkv_first_kept_block(hit * b, p->w, b); j < hit; j++) {\n"
        "    const int64_t x = found[j];\n",
        "    for (int64_t j = pkv_first_kept_block(c * b, p->w, b) + 1; j < c && ok; j++) ok = found[j] >= 0;\n"
        "    if (ok) hit = c;\n  }\n  const int64_t si = seq_insert(p, seq, hit * b, identity, chains[hit]);\n"
        "  int64_t *t = tab_of(p, si);\n  for (int64_t j = pkv_first_kept_block(hit * b, p->w, b); j < hit; j++) {\n"
        "    const int64_t x = found[j];\n    if (x < 0) { t[pkv_ring_index(j, p->tcap)] = -1; continue; }\n"),
    "paged-hit-ignores-identity": (
        "prefix hit across another config's identity", LORA_HASH,
        "admit looks the prompt up under identity 0 whatever its identity tag: blocks another adapter or config "
        "filled are hit",
        "pagedkv.c",
        "  chains[0] = chain_root(identity);\n  for (int64_t c = 0; c < cmax; c++) {\n    chains[c + 1] = chains[c];\n"
        "    chain_block(&chains[c + 1], b, d, c * b, keys + c * b * d, values + c * b * d);\n"
        "    found[c] = cache_find(p, identity, chains[c + 1], c, keys, values);",
        "  chains[0] = chain_root(0);\n  for (int64_t c = 0; c < cmax; c++) {\n    chains[c + 1] = chains[c];\n"
        "    chain_block(&chains[c + 1], b, d, c * b, keys + c * b * d, values + c * b * d);\n"
        "    found[c] = cache_find(p, 0, chains[c + 1], c, keys, values);"),
    # At production sizes (issue 28): right in every pool of up to 256 blocks, 16 live sequences or pages of 256.
    "paged-c-block-id-8-bits": (
        "an index type too narrow for the pool (block id in 8 bits)", NARROW_COUNTER,
        "the block an append takes is stored in the table through a uint8_t, as a table sized for pools of 256 "
        "blocks does: right up to 256 blocks, past that block 256+x is recorded as block x",
        "pagedkv.c", "    *e = take_free(p);\n", "    *e = (uint8_t)take_free(p); /* mutant: block id in 8 bits */\n"),
    "paged-c-sixteen-lanes": (
        "more live sequences than a fixed table holds (16 lanes)", FIXED_TABLE,
        "the sequences' block tables live in 16 lanes: the 17th live sequence's table is the first's, so two "
        "sequences with tokens overwrite each other's tables (records and ids stay distinct)",
        "pagedkv.c", "{ return p->tab + si * p->tcap; }", "{ return p->tab + (si & 15) * p->tcap; /* mutant */ }"),
    "paged-c-slot-8-bits": (
        "an index type too narrow for the block (in-block slot in 8 bits)", NARROW_COUNTER,
        "an append's slot inside its block passes through a uint8_t: right for pages of up to 256, in a page of "
        "257 position 256 of the block is written over position 0",
        "pagedkv.c", "  const int64_t row = pkv_pool_row(*e, slot, b);\n",
        "  const int64_t row = pkv_pool_row(*e, (uint8_t)slot, b); /* mutant: slot in 8 bits */\n"),
}

#: name -> (bug class, reference, description, old, new) in impl/mutants/paged_pool.py
PY_PAGED_EDITS: dict[str, tuple[str, str, str, str, str]] = {
    "paged-batch-by-longest": (
        "ragged batch step that advances every sequence alike (by the longest)", BATCH_POS,
        "append_batch evaluates the freeing rule of every sequence in the batch at the longest one's length: "
        "a shorter sequence releases blocks its next query needs",
        "            for seq, pos, key, value in items:\n                self._append(self.seqs[seq], pos, key, value)\n",
        "            top = max(self.seqs[it[0]].n for it in items)\n"
        "            for seq, pos, key, value in items:\n"
        "                self.seqs[seq].hw = max(self.seqs[seq].hw, top + 1)\n"
        "                self._append(self.seqs[seq], pos, key, value)\n"),
    # At production sizes (issue 28): right for every block size up to 16 and every case of up to 4 live sequences.
    "paged-offset-4-bits": (
        "an index type too narrow for the block (in-block offset in 4 bits)", NARROW_COUNTER,
        "the slot of a position inside its block is packed into 4 bits, as a table sized for pages of 16 does: "
        "right for block sizes up to 16, past that a position lands in another position's slot",
        "        j, i = s.n // B, s.n % B\n",
        "        j, i = s.n // B, (s.n % B) & 0xF  # the in-block offset packed into 4 bits\n"),
    "paged-four-lanes": (
        "more live sequences than a fixed table holds (4 lanes)", FIXED_TABLE,
        "sequence state lives in a fixed table of 4 lanes: a fifth live sequence is handed the lane (and so the "
        "table and length) of a live one, so two sequences read and write one history",
        "        self._new(seq)\n        self.seqs[seq] = _Seq()\n",
        "        self._new(seq)\n        lanes = list(self.seqs.values())[:4]  # a fixed table of 4 sequence lanes\n"
        "        self.seqs[seq] = _Seq() if len(self.seqs) < 4 else lanes[len(self.seqs) % 4]\n"),
}


def build_paged_c_mutant(name: str, file: str, old: str, new: str) -> Path:
    """``csrc/pagedkv.c`` with the edit applied to ``file``, compiled into the mutant cache directory (named by
    the hash of the edit and the sources, so an unchanged mutant is compiled once)."""
    from impl import _paged_build as pb

    if not (pb.CSRC / "pagedkv.c").exists():
        raise MutantUnavailable(f"{pb.CSRC / 'pagedkv.c'} is not present")
    if file not in pb.SOURCES:
        raise MutantError(f"mutant {name}: csrc/{file} is not a source of the C paged pool")
    sources = sorted((n, (pb.CSRC / n).read_text()) for n in pb.SOURCES)
    apply_edit(dict(sources)[file], old, new, f"mutant {name} (csrc/{file})")  # a stale edit fails here
    digest = hashlib.sha256(repr((file, old, new, sources)).encode()).hexdigest()[:16]
    lib = cache_dir() / f"{name}-{digest}" / "libpagedkv_mutant.so"
    if lib.exists():
        return lib
    try:
        return pb.compile_paged_library(lib, replace=(old, new), file=file)
    except pb.NoCompiler as e:
        raise MutantUnavailable(str(e)) from e
    except pb.CompileError as e:
        raise MutantError(f"mutant {name}: {e}") from e


_PY_CACHE: dict[str, type] = {}


def py_paged_class(name: str, old: str, new: str) -> type:
    """:class:`~impl.mutants.paged_pool.BlockPool` with one edit, as a class (built once per process)."""
    if name not in _PY_CACHE:
        from impl.mutants import paged_pool

        src = apply_edit(inspect.getsource(paged_pool), old, new, f"mutant {name} (impl/mutants/paged_pool.py)")
        ns: dict[str, Any] = {"__name__": f"impl.mutants._mutant_{name.replace('-', '_')}"}
        exec(compile(src, f"<mutant {name} of impl/mutants/paged_pool.py>", "exec"), ns)  # noqa: S102
        _PY_CACHE[name] = ns["BlockPool"]
    return _PY_CACHE[name]


def paged_mutants() -> list[Mutant]:
    """Every paged mutant: the C pool's, then the Python pool's."""
    out = []
    for name, (cls, ref, desc, file, old, new) in PAGED_C_EDITS.items():
        def build(name=name, file=file, old=old, new=new) -> Path:
            return build_paged_c_mutant(name, file, old, new)

        out.append(Mutant(name, cls, ref, desc, "paged-c", build, (f"csrc/{file}", old.strip(), new.strip())))
    for name, (cls, ref, desc, old, new) in PY_PAGED_EDITS.items():
        def build_py(name=name, old=old, new=new) -> type:
            return py_paged_class(name, old, new)

        out.append(Mutant(name, cls, ref, desc, "py-paged", build_py,
                          ("impl/mutants/paged_pool.py", old.strip(), new.strip())))
    return out
