"""What a restructuring must leave byte for byte as it was: the OpenAPI document, the worked
example's report body, and the verifier's document for every bundle of the conformance set
(replayed, so each passing report's body is recomputed by the engine and compared with the
signed one), and the Node verifier's answer for each of them. `python -m tests.architecture.identity --record` writes `identity.json`."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import orjson

from tests.aggregation_helpers import build_input, freeze
from tests.bundle_helpers import NODE_VERIFIER, node_verify_many

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RECORD = HERE / "identity.json"
CONFORMANCE = REPO / "tests" / "bundles"
WORKED = REPO / "tests" / "data" / "worked-example.json"


def _digest(value: Any) -> str:
    """sha256 of a JSON value's sorted, compact serialisation."""
    data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest()


def openapi_digest() -> str:
    """The OpenAPI document of an application on its defaults (no lifespan needed)."""
    from app.api.main import create_app
    from app.platform.config import Settings

    return _digest(create_app(Settings()).openapi())


def worked_example_digest() -> str:
    """The engine's report body for the worked example."""
    from app.aggregation.engine import aggregate

    example = json.loads(WORKED.read_text())
    content = freeze(example["suite_version"], example["dataset"], example["scorers"])
    inp = build_input(
        content,
        example["dataset"],
        example["scorers"],
        example["cases"],
        evaluation_id=example["evaluation_id"],
    )
    return _digest(aggregate(inp).body)


def bundle_digests() -> dict[str, str]:
    """Each conformance case's `verify-bundle --json --replay`: its exit status and what it
    wrote, digested."""
    from app.cli.main import main

    found = {}
    for bundle in sorted(CONFORMANCE.glob("*/bundle.jsonl.gz")):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(["verify-bundle", str(bundle), "--json", "--replay"])
        said = {"exit": status, "stdout": out.getvalue(), "stderr": err.getvalue()}
        found[bundle.parent.name] = _digest(said)
    return found


def node_bundle_digests(verifier: Path = NODE_VERIFIER) -> dict[str, str]:
    """Each conformance case as the Node verifier's `verifyFile` answers it, digested."""
    bundles = sorted(CONFORMANCE.glob("*/bundle.jsonl.gz"))
    answers = node_verify_many(bundles, verifier=verifier)
    return {
        bundle.parent.name: _digest(answer) for bundle, answer in zip(bundles, answers, strict=True)
    }


def current(node_verifier: Path = NODE_VERIFIER) -> dict[str, Any]:
    """Every digest, as this tree makes them."""
    return {
        "openapi": openapi_digest(),
        "worked_example": worked_example_digest(),
        "bundles": bundle_digests(),
        "node_bundles": node_bundle_digests(node_verifier),
    }


if __name__ == "__main__":
    # --record [NODE_VERIFIER]: the Node verifier may be an earlier copy of verify-bundle.mjs.
    if sys.argv[1:2] != ["--record"]:
        sys.exit("usage: python -m tests.architecture.identity --record [NODE_VERIFIER]")
    node = Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else NODE_VERIFIER
    RECORD.write_text(json.dumps(current(node), indent=2, sort_keys=True) + "\n")
