"""Summaries of repeated measurements (min / median / max, ratios of two sides measured side by side)
and the JSON-plain form of what the measuring helpers return."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, is_dataclass
from typing import Any


def stats(values: list[float]) -> dict[str, Any]:
    """min / median / max (and the raw values) of the repeats of one measurement."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return {"n": 0, "min": None, "median": None, "max": None, "values": []}
    return {"n": len(vals), "min": min(vals), "median": statistics.median(vals), "max": max(vals),
            "values": vals}


def ratio(values: list[float], label: str, numerator: str, denominator: str, **extra) -> dict[str, Any]:
    """A side-by-side comparison: ``numerator / denominator`` per repeat, summarised."""
    out = {"label": label, "numerator": numerator, "denominator": denominator, **stats(values)}
    out.update(extra)
    return out


def plain(x: Any) -> Any:
    """Make helper results JSON-serialisable (dataclasses, numpy scalars, tensors, tuples)."""
    if is_dataclass(x) and not isinstance(x, type):
        return plain(asdict(x))
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if hasattr(x, "tolist"):
        return x.tolist()
    if hasattr(x, "item") and callable(x.item):
        try:
            return x.item()
        except Exception:  # noqa: BLE001
            return str(x)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)
