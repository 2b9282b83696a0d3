"""The README's quickstart, run as a user would against a served process, so it cannot rot."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, cli_admin_token, free_port, wait_ready


def test_the_quickstart_runs(database_url: str, tmp_path: Path, key_env: dict[str, str]) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALBOOK_")}
    served = subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)],
        env={
            **env,
            "EVALBOOK_DATABASE_URL": database_url,
            "EVALBOOK_DATA_DIR": str(tmp_path),
            **key_env,
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    try:
        wait_ready(base, process=served)
        token = cli_admin_token(database_url, "quickstart/demo")
        run = subprocess.run(
            ["bash", str(REPO / "examples" / "quickstart.sh")],
            env={
                **env,
                "EVALBOOK_URL": base,
                "EVALBOOK_TOKEN": token,
                "EVALBOOK_CLI": str(Path(sys.executable).parent / "evalbook"),
                "PYTHON": sys.executable,
            },
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        served.terminate()
        served.wait(30)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "report " in out and ": pass (" in out
    assert "arithmetic pass current" in out
    assert "verified: True" in out
    assert out.rstrip().endswith("done")
    if shutil.which("node"):
        assert "node not found" not in out
        # Both verifiers count what they prove the same way (the replay has a line of its own).
        counts = re.findall(r"; (\d+) checks proven;", out)
        assert len(counts) == 2 and counts[0] == counts[1], out
