"""`evalbook verify-bundle`: the offline verifier's command (its options and code live in
app/bundles/cli.py, in the core, which runs without the rest of the service)."""

from __future__ import annotations

from app.bundles.cli import EPILOG, add_arguments, cmd_verify_bundle
from app.cli.registry import Command

COMMANDS = [
    Command(
        ("verify-bundle",),
        "verify a reproducibility bundle offline",
        cmd_verify_bundle,
        add_arguments,
        epilog=EPILOG,
    )
]
