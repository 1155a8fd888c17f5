"""Launch a test worker script under torchrun on CPU ranks (gloo), as the local backend does."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def torchrun(worker: Path, nproc: int, *args: str) -> None:
    """Run ``worker`` with ``args`` on ``nproc`` ranks (one OpenMP thread each); fail the test with
    its output when a rank fails."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={nproc}",
            str(worker),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
