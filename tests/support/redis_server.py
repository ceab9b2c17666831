"""A throwaway redis-server on a free loopback port, for the tests that share (or lose) an example database."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def redis_server(directory: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """``(url, process)`` of a fresh server (killed on exit); skips the test without redis-server or the client."""
    import pytest

    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server binary not found (apt-get install redis-server; .ci/run installs it)")
    redis = pytest.importorskip("redis", reason="the redis client is not installed (pip install 'kvwindow[dev]')")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        for _ in range(100):
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail("redis-server did not start")
        yield url, proc
    finally:
        proc.kill()
        proc.wait(timeout=10)
