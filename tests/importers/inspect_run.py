"""Running the tiny task of tests/importers with Inspect itself (mock model, offline), for the
importer tests and for bench/importers.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TASK_DIR = Path(__file__).resolve().parent


def run_inspect(
    log_dir: Path, log_format: str, *options: str, task_file: str = "inspect_task.py"
) -> Path:
    """Run a task of tests/importers (inspect_task.py unless named) on the mock model, logging
    in `log_format` (eval or json) to `log_dir`, with more `options` for `inspect eval`; the
    log Inspect wrote."""
    command = [str(Path(sys.executable).parent / "inspect"), "eval", task_file]
    command += ["--model", "mockllm/model", "--log-format", log_format, "--display", "none"]
    subprocess.run(
        [*command, "--log-dir", str(log_dir), *options],
        cwd=TASK_DIR,
        check=True,
        capture_output=True,
        timeout=300,
        env={**os.environ, "INSPECT_DISPLAY": "none"},
    )
    (log,) = log_dir.glob(f"*.{log_format}")
    return log
