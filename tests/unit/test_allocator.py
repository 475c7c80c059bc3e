"""container.allocator: glibc malloc thresholds for the container process (in a subprocess, so
this test process keeps its own allocator settings)."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = "import json; from container.allocator import tune_allocator; print(json.dumps(tune_allocator()))"


def probe(**env) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, **env}).stdout
    return json.loads(out)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_both_thresholds_are_set_on_glibc():
    assert probe() == {"MALLOC_MMAP_THRESHOLD_": 64 * 1024 * 1024, "MALLOC_TRIM_THRESHOLD_": 256 * 1024 * 1024}


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_operators_environment_wins():
    assert probe(MALLOC_MMAP_THRESHOLD_="131072") == {"MALLOC_TRIM_THRESHOLD_": 256 * 1024 * 1024}
