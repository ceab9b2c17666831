"""Regression seeds: one human-readable JSON file per bug, replayed by pytest forever.

A seed holds a :class:`~fuzz.ops.Case` (the window and the op list) and where
it was found — or, for a paged cache, a :class:`~fuzz.paged.ops.PagedCase` under ``"paged"`` (the pool
configuration and the sequence ops); :func:`fuzz.paged.ops.case_from_json` tells the two apart. Its id is the case's id, a hash of the case alone, so the same bug found twice — by two
targets, two workers, two machines — is stored once.

Files are written atomically (a temp file named after the writing process, fsync,
rename) with the mode the umask gives; a temp file left by a killed run is removed by
the next one (:func:`clean_stale_temps`). Every file that is not a usable seed —
unreadable, binary, not UTF-8, not JSON, nested too deep, the wrong shape, a window or
chunk beyond :data:`fuzz.config.WINDOW_BOUND` / :data:`fuzz.config.CHUNK_BOUND` — raises
:class:`SeedError` naming the file and the problem in one line. A corrupt file is never
overwritten: a new seed with its id moves it aside to ``<id>.json.corrupt`` first.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from fuzz.config import CHUNK_BOUND, WIDTH_BOUND, WINDOW_BOUND, bounds_error
from fuzz.oracle import PAYLOAD_WIDTH
from fuzz.ops import Case, Chunk, OpError, target_of
from fuzz.paged.ops import case_from_json

#: This repository's own regression seeds (shipped with the package, replayed by ``make test``);
#: campaigns save into :func:`default_seeds_dir`, never here unless a project points there.
SEED_DIR = Path(__file__).parent / "seeds"
FORMAT = 1
#: The largest file read as a seed: a seed is a few kilobytes.
MAX_SEED_BYTES = 1 << 20
#: A temp file of :func:`atomic_write_json`: ``.<name>.<pid>.<random>.tmp``.
TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[^.]+\.tmp$")
#: A temp file older than this (seconds) is stale even if a process of its pid is alive (pids are reused).
TEMP_STALE_S = 3600.0
#: The environment variable that names a seeds directory.
SEEDS_ENV = "KVWINDOW_SEEDS"
#: The default seeds directory, in the current directory.
DEFAULT_SEEDS = "kvwindow-seeds"


def default_seeds_dir(cwd: str | Path | None = None) -> Path:
    """Where a user's seeds live when ``--seeds-dir`` does not say: ``$KVWINDOW_SEEDS``, else
    ``[tool.kvwindow] seeds-dir`` of ``pyproject.toml`` in ``cwd`` (relative to it), else
    ``cwd/kvwindow-seeds`` — the user's project, never the installed package. A pyproject.toml
    that cannot be read, or whose setting is not a string, raises :class:`SeedError` naming it."""
    base = Path.cwd() if cwd is None else Path(cwd)
    env = os.environ.get(SEEDS_ENV)
    if env:
        return base / env
    pyproject = base / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        try:
            doc = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
            raise SeedError(f"{pyproject}: cannot read [tool.kvwindow]: {e}") from e
        value = doc.get("tool", {}).get("kvwindow", {}).get("seeds-dir")
        if value is not None:
            if not isinstance(value, str) or not value:
                raise SeedError(f"{pyproject}: [tool.kvwindow] seeds-dir must be a path string, got {value!r}")
            return base / value
    return base / DEFAULT_SEEDS


class SeedError(ValueError):
    """A seed file that cannot be used; the message names the file and the problem."""


@dataclass
class Seed:
    """A :class:`~fuzz.ops.Case` and where it was found; its id is the case's id."""

    case: Case
    found: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.case.id

    @property
    def run_case(self) -> Case:
        """The case as replays run it: a seed saved before cases carried their payload (by a campaign run with
        ``--width``/``--dtype``, recorded in ``found``) gets those back, so it replays with the payloads it
        was found with; a case that names its own width and dtype runs as it is."""
        case = self.case
        width, dtype = self.found.get("width"), self.found.get("dtype")
        if case.width is None and isinstance(width, int) and not isinstance(width, bool) and width >= 1:
            case = case.replace(width=width)
        if case.dtype is None and dtype in ("float32", "float16", "bfloat16"):
            case = case.replace(dtype=dtype)
        return case

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "id": self.id, **self.case.to_json(), "found": self.found}


def check_bounds(case: Case, where: str = "seed") -> None:
    """Raise :class:`SeedError` when a dimension of ``case`` — a window, a chunk, a payload width, a window times its
    width, a paged pool — is beyond the one set of bounds (:func:`fuzz.config.bounds_error`), before anything is
    allocated for it."""
    if getattr(case, "paged", False):
        longest = max((getattr(op, "n", 0) or getattr(op, "k", 0) or getattr(op, "length", 0) for op in case.ops),
                      default=None) or None
        why = bounds_error(window=case.window, block_size=case.block_size, num_blocks=case.num_blocks,
                           width=case.width, chunk=longest)
        if why is not None:
            raise SeedError(f"{where}: {why}")
        return
    widest = case.widest_window()
    if widest > WINDOW_BOUND:
        raise SeedError(f"{where}: window {widest} is beyond the bound {WINDOW_BOUND} (1 <= W <= {WINDOW_BOUND})")
    longest = max((bare.n for bare in (target_of(op)[1] for op in case.ops) if isinstance(bare, Chunk)), default=0)
    if longest > CHUNK_BOUND:
        raise SeedError(f"{where}: chunk of {longest} tokens is beyond the bound {CHUNK_BOUND}")
    width = case.widest_payload()
    if width is not None and width > WIDTH_BOUND:
        raise SeedError(f"{where}: payload width {width} is beyond the bound {WIDTH_BOUND}")
    why = bounds_error(window=widest, width=width or PAYLOAD_WIDTH)
    if why is not None:
        raise SeedError(f"{where}: {why}")


def parse_seed(doc: Any, where: str = "seed") -> Seed:
    if not isinstance(doc, dict):
        raise SeedError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format", FORMAT) != FORMAT:
        raise SeedError(f"{where}: unsupported seed format {doc.get('format')!r} (this kvwindow reads {FORMAT})")
    try:
        case = case_from_json(doc)
    except OpError as e:
        raise SeedError(f"{where}: {e}") from e
    found = doc.get("found", {})
    if not isinstance(found, dict):
        raise SeedError(f"{where}: 'found' must be an object, got {type(found).__name__}")
    check_bounds(case, where)
    seed = Seed(case, found)
    if "id" in doc and doc["id"] != seed.id:
        raise SeedError(f"{where}: id {doc['id']!r} does not match its content (expected {seed.id!r}); "
                        "the file was edited or truncated")
    return seed


def load_seed(path: str | Path) -> Seed:
    """The seed in ``path``; :class:`SeedError` naming the file and the problem for anything else."""
    path = Path(path)
    data = read_regular(path, MAX_SEED_BYTES, "a seed")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SeedError(f"{path}: not UTF-8 text (a binary file?): byte {e.start} is {data[e.start:e.start + 1]!r}") \
            from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise SeedError(f"{path}: not valid JSON (truncated?): {e}") from None
    except RecursionError:
        raise SeedError(f"{path}: not a seed: JSON nested too deeply") from None
    except ValueError as e:  # e.g. an integer with more digits than Python converts
        raise SeedError(f"{path}: not valid JSON: {e}") from None
    try:
        return parse_seed(doc, str(path))
    except SeedError:
        raise
    except (RecursionError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise SeedError(f"{path}: not a seed: {type(e).__name__}: {str(e)[:200]}") from None


def read_regular(path: Path, limit: int, what: str) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes, else :class:`SeedError` naming it.

    Opened with ``O_NONBLOCK`` (a FIFO does not block the open) and checked with ``fstat`` on the open file (a
    symlink to ``/dev/zero``, a FIFO, a device, a directory are refused, whatever the name said), then read to
    at most ``limit + 1`` bytes: a file that grows while it is read cannot make the read unbounded."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise SeedError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else
                    "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                    "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise SeedError(f"{path}: is {kind}, not {what} file (only regular files are read)")
        chunks, size = [], 0
        while size <= limit:
            block = os.read(fd, min(1 << 16, limit + 1 - size))
            if not block:
                break
            chunks.append(block)
            size += len(block)
    except OSError as e:
        raise SeedError(f"{path}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise SeedError(f"{path}: more than {limit} bytes is too large for {what} (at most {limit})")
    return b"".join(chunks)


def seed_paths(directory: str | Path = SEED_DIR) -> list[Path]:
    return sorted(Path(directory).glob("*.json"))


def load_all(directory: str | Path = SEED_DIR) -> list[tuple[Path, Seed]]:
    """Every seed in ``directory``; the first malformed one raises :class:`SeedError`."""
    return [(p, load_seed(p)) for p in seed_paths(directory)]


class Saved(NamedTuple):
    """Where :func:`store_seed` put a seed: ``created`` False when it was already stored;
    ``moved_aside`` the new name of a corrupt file that held its id."""

    path: Path
    created: bool
    moved_aside: Path | None


def store_seed(seed: Seed, directory: str | Path = SEED_DIR, *, move_corrupt: bool = True) -> Saved:
    """Write ``seed`` atomically as ``<id>.json``.

    An existing seed with the same id is the same case and is left untouched
    (``created`` is False). A corrupt file of that name — or one holding another
    case — is never overwritten: it is moved aside to ``<id>.json.corrupt`` and the
    new seed written in its place (a finding is never blocked by it), or, with
    ``move_corrupt=False`` (a seed added by hand), :class:`SeedError` names it.
    Raises ``OSError`` when the directory cannot be written.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{seed.id}.json"
    aside = None
    if path.exists() or path.is_symlink():
        try:
            stored = load_seed(path)
        except SeedError:
            if not move_corrupt:
                raise
        else:
            if stored.id == seed.id:
                return Saved(path, False, None)
            if not move_corrupt:
                raise SeedError(f"{path}: holds seed {stored.id}, not the seed its name says")
        aside = move_aside(path)
    doc = seed.to_json()
    atomic_write_json(path, doc, format_seed(doc))
    return Saved(path, True, aside)


def save_seed(seed: Seed, directory: str | Path = SEED_DIR) -> tuple[Path, bool]:
    """:func:`store_seed`, returning ``(path, created)``."""
    saved = store_seed(seed, directory)
    return saved.path, saved.created


def move_aside(path: Path) -> Path:
    """Rename ``path`` to ``<name>.corrupt`` (``.corrupt.1``, ... if taken); returns the new path."""
    dest = path.with_name(path.name + ".corrupt")
    n = 0
    while dest.exists() or dest.is_symlink():
        n += 1
        dest = path.with_name(f"{path.name}.corrupt.{n}")
    os.rename(path, dest)
    return dest


def format_seed(doc: dict[str, Any]) -> str:
    """Indented JSON with one op per line, so a seed reads (and diffs) like the op list it is."""
    if "paged" in doc:  # the ops of a paged case sit one level down
        ops = doc["paged"]["ops"]
        body = json.dumps({**doc, "paged": {**doc["paged"], "ops": "\0OPS\0"}}, indent=2)
        rows = ",\n".join("      " + json.dumps(op) for op in ops)
        return body.replace('"\\u0000OPS\\u0000"', f"[\n{rows}\n    ]" if ops else "[]")
    ops = doc["ops"]
    body = json.dumps({**doc, "ops": "\0OPS\0"}, indent=2)
    rows = ",\n".join("    " + json.dumps(op) for op in ops)
    return body.replace('"\\u0000OPS\\u0000"', f"[\n{rows}\n  ]" if ops else "[]")


def _umask() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_json(path: Path, doc: Any, text: str | None = None) -> None:
    """Write ``doc`` (or the preformatted ``text``) to ``path`` atomically: temp file, fsync, rename.
    The file gets the mode a plain ``open`` would (``0o666`` less the umask), not the temp file's 0600."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text if text is not None else json.dumps(doc, indent=2))
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def clean_stale_temps(directory: str | Path) -> list[Path]:
    """Remove the temp files a killed run of :func:`atomic_write_json` left in ``directory`` (their
    process is gone, or they are older than :data:`TEMP_STALE_S`); returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    now = time.time()
    for e in entries:
        m = TEMP_NAME.match(e.name)
        if m is None or not e.is_file(follow_symlinks=False):
            continue
        pid = int(m["pid"])
        try:
            stale = (pid != os.getpid() and not _alive(pid)) or now - e.stat().st_mtime > TEMP_STALE_S
            if stale:
                os.unlink(e.path)
                removed.append(Path(e.path))
        except OSError:
            continue
    return removed
