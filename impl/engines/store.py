"""The conversion cache: what an engine's converter wrote (a CTranslate2 model folder, a GGUF file),
kept under ``.kvwindow-cache/`` and keyed by a hash of everything that determines it (the HF
config, a fingerprint of the weights, the engine's version, the converter's options).

Converting a tiny model takes from under a second (CTranslate2) to several seconds (GGUF through
llama.cpp's converter, transformers import included), and a campaign asks for one model per window,
so conversions are made once per key and reused across processes and runs.

An entry is a folder ``<root>/<kind>/<hash>/`` holding the converter's files and ``MANIFEST.json``
(the key, and the size and SHA-256 of every file). An entry is trusted only when its manifest
parses, names the same key and every file matches; anything else (a half-written folder, a
truncated file, a flipped bit) is removed and rebuilt, never used. Writes are atomic: the
converter writes into a temporary sibling folder that is renamed into place once its manifest is
written; a concurrent builder that loses the race uses the winner's entry. The temporary folder of a
conversion that was killed is removed by the next one (:func:`clean_stale`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

#: Where entries live: ``$KVWINDOW_CACHE_DIR``, else ``.kvwindow-cache/`` in the working directory.
ENV = "KVWINDOW_CACHE_DIR"
MANIFEST = "MANIFEST.json"


class StoreError(OSError):
    """The cache folder cannot be written (the message names the folder and how to move it)."""


def root() -> Path:
    return Path(os.environ.get(ENV) or Path.cwd() / ".kvwindow-cache")


def key_hash(key: dict[str, Any]) -> str:
    """The entry name of ``key`` (a JSON-serialisable dict): 20 hex digits of its canonical SHA-256."""
    text = json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def verify(folder: Path, key: dict[str, Any]) -> bool:
    """Is ``folder`` a complete entry for ``key``: its manifest names ``key``, lists exactly the files
    present, and each file has the recorded size and SHA-256?"""
    try:
        man = json.loads((folder / MANIFEST).read_text())
        if man.get("key") != json.loads(json.dumps(key, sort_keys=True, default=str)):
            return False
        listed = man["files"]
        present = {str(p.relative_to(folder)): p for p in _files(folder)}
        if set(listed) != set(present) or not listed:
            return False
        for name, rec in listed.items():
            p = present[name]
            if p.stat().st_size != rec["size"] or _digest(p) != rec["sha256"]:
                return False
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False


#: A temporary folder of :func:`entry`: ``.<hash>.<pid>.<random>``.
TEMP_NAME = re.compile(r"^\.[0-9a-f]{20}\.(?P<pid>\d+)\.[^.]+$")
#: A temporary folder older than this (seconds) is stale even if a process of its pid is alive (pids are reused).
TEMP_STALE_S = 3600.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def clean_stale(base: Path) -> list[Path]:
    """Remove the temporary folders a killed conversion left in ``base`` (its process is gone, or the folder is
    older than :data:`TEMP_STALE_S`), the rule :func:`fuzz.seeds.clean_stale_temps` applies to seed files;
    returns what was removed. Entries themselves are never touched here (:func:`verify` judges them)."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    now = time.time()
    for e in entries:
        m = TEMP_NAME.match(e.name)
        if m is None or not e.is_dir(follow_symlinks=False):
            continue
        pid = int(m["pid"])
        try:
            if (pid != os.getpid() and not _alive(pid)) or now - e.stat(follow_symlinks=False).st_mtime > TEMP_STALE_S:
                shutil.rmtree(e.path)
                removed.append(Path(e.path))
        except OSError:
            continue
    return removed


def entry(kind: str, key: dict[str, Any], build: Callable[[Path], None]) -> Path:
    """The folder of ``kind``'s entry for ``key``, built by ``build(folder)`` (which writes the
    converter's files into the empty ``folder``) when no valid entry exists. A corrupt entry is
    removed and rebuilt."""
    base = root() / kind
    final = base / key_hash(key)
    if final.is_dir() and verify(final, key):
        return final
    clean_stale(base)
    try:
        base.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.{os.getpid()}.", dir=base))
    except OSError as e:
        raise StoreError(f"cannot write the conversion cache {base}: {e} (set {ENV} to a writable folder)") from e
    try:
        build(tmp)
        files = {str(p.relative_to(tmp)): {"size": p.stat().st_size, "sha256": _digest(p)} for p in _files(tmp)}
        if not files:
            raise StoreError(f"the {kind} converter wrote nothing into {tmp}")
        man = tmp / MANIFEST
        man.write_text(json.dumps({"key": key, "files": files}, sort_keys=True, indent=1, default=str))
        if final.exists():  # corrupt (checked above) or a concurrent builder's: check again, then replace
            if verify(final, key):
                shutil.rmtree(tmp, ignore_errors=True)
                return final
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:
            if not verify(final, key):  # not a race we lost: a real failure
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
