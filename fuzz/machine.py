"""What machine a measurement or a campaign ran on: one record for ``kvwindow fuzz --report`` and
``kvwindow bench`` alike, so the two reports can be read side by side."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any


def machine_info() -> dict[str, Any]:
    """CPU model, usable cores, load, package versions, GPU, git commit, host and pid."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    versions: dict[str, str | None] = {"python": platform.python_version()}
    from importlib import metadata

    for pkg in ("kvwindow", "torch", "numpy", "hypothesis", "transformers", "matplotlib", "cffi", "rich"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    gpu = None
    try:
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001
        pass
    commit = None
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent.parent, timeout=5).stdout.strip() or None
    except Exception:  # noqa: BLE001
        pass
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {"host": platform.node(), "pid": os.getpid(), "cpu": cpu, "logical_cores": os.cpu_count(), "usable_cores": usable,
            "platform": platform.platform(), "versions": versions, "gpu": gpu, "git_commit": commit,
            "load_average_at_start": load,
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
