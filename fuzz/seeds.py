"""Regression seeds: one human-readable JSON file per bug, replayed by pytest forever.

A seed holds a :class:`~fuzz.ops.Case` (the window and the op list) and where
it was found. Its id is the case's id, a hash of the case alone, so the same bug found twice — by two
targets, two workers, two machines — is stored once. Files are written
atomically (temp file + ``os.replace``); a malformed file raises
:class:`SeedError` naming the file and the problem, and is never overwritten.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzz.ops import Case, OpError

#: This repository's own regression seeds (shipped with the package, replayed by ``make test``);
#: campaigns save into :func:`default_seeds_dir`, never here unless a project points there.
SEED_DIR = Path(__file__).parent / "seeds"
FORMAT = 1
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
        except (OSError, tomllib.TOMLDecodeError) as e:
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

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "id": self.id, **self.case.to_json(), "found": self.found}


def parse_seed(doc: Any, where: str = "seed") -> Seed:
    if not isinstance(doc, dict):
        raise SeedError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format", FORMAT) != FORMAT:
        raise SeedError(f"{where}: unsupported seed format {doc.get('format')!r} (this kvwindow reads {FORMAT})")
    try:
        case = Case.from_json(doc)
    except OpError as e:
        raise SeedError(f"{where}: {e}") from e
    found = doc.get("found", {})
    if not isinstance(found, dict):
        raise SeedError(f"{where}: 'found' must be an object, got {type(found).__name__}")
    seed = Seed(case, found)
    if "id" in doc and doc["id"] != seed.id:
        raise SeedError(f"{where}: id {doc['id']!r} does not match its content (expected {seed.id!r}); "
                        "the file was edited or truncated")
    return seed


def load_seed(path: str | Path) -> Seed:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SeedError(f"{path}: cannot read: {e.strerror or e}") from e
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise SeedError(f"{path}: not valid JSON (truncated?): {e}") from e
    return parse_seed(doc, str(path))


def seed_paths(directory: str | Path = SEED_DIR) -> list[Path]:
    return sorted(Path(directory).glob("*.json"))


def load_all(directory: str | Path = SEED_DIR) -> list[tuple[Path, Seed]]:
    """Every seed in ``directory``; the first malformed one raises :class:`SeedError`."""
    return [(p, load_seed(p)) for p in seed_paths(directory)]


def save_seed(seed: Seed, directory: str | Path = SEED_DIR) -> tuple[Path, bool]:
    """Write ``seed`` atomically as ``<id>.json``; returns ``(path, created)``.

    An existing seed with the same id is the same case and is left untouched
    (``created`` is False) — unless it is corrupt, which raises rather than
    silently replacing what a user may want to inspect.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{seed.id}.json"
    if path.exists():
        load_seed(path)  # raises SeedError if the stored copy is corrupt
        return path, False
    doc = seed.to_json()
    atomic_write_json(path, doc, format_seed(doc))
    return path, True


def format_seed(doc: dict[str, Any]) -> str:
    """Indented JSON with one op per line, so a seed reads (and diffs) like the op list it is."""
    ops = doc["ops"]
    body = json.dumps({**doc, "ops": "\0OPS\0"}, indent=2)
    rows = ",\n".join("    " + json.dumps(op) for op in ops)
    return body.replace('"\\u0000OPS\\u0000"', f"[\n{rows}\n  ]" if ops else "[]")


def atomic_write_json(path: Path, doc: Any, text: str | None = None) -> None:
    """Write ``doc`` (or the preformatted ``text``) to ``path`` atomically: temp file, fsync, rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
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
