"""Running one measured tool in a fresh interpreter: shared by the benchmark scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_child(
    script: str,
    args: list[str],
    tool: str,
    profile: Path | None = None,
    *,
    prefix: list[str] | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> dict:
    """Run ``script`` with ``args`` in a new interpreter (optionally under cProfile, after a ``prefix`` command
    such as ``taskset -c 0``, in ``cwd``: the repository by default) and return the JSON it printed on its
    ``BENCH_RESULT`` line, with the whole process's wall time as ``process_s``; ``env``: variables set for the
    child."""
    cmd = list(prefix or []) + [sys.executable]
    if profile is not None:
        cmd += ["-m", "cProfile", "-o", str(profile)]
    cmd += [str(Path(script).resolve()), *args]
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(cwd or REPO))
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"{tool} child failed with exit code {proc.returncode}")
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            out = json.loads(line[len("BENCH_RESULT ") :])
            out["process_s"] = wall
            return out
    sys.stderr.write(proc.stdout + proc.stderr)
    raise SystemExit(f"{tool} child printed no result")
