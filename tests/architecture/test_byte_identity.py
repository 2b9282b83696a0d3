"""A restructuring changes where code lives, not what it says: the OpenAPI document, the
worked example's body and every conformance bundle's verification are what they were when
`identity.json` was recorded (`python -m tests.architecture.identity --record`, only when a
change of behaviour is meant)."""

from __future__ import annotations

import json

from tests.architecture import identity


def test_openapi_document_is_unchanged() -> None:
    assert identity.openapi_digest() == json.loads(identity.RECORD.read_text())["openapi"]


def test_worked_example_body_is_unchanged() -> None:
    recorded = json.loads(identity.RECORD.read_text())["worked_example"]
    assert identity.worked_example_digest() == recorded


def test_every_conformance_bundle_verifies_as_before() -> None:
    recorded = json.loads(identity.RECORD.read_text())["bundles"]
    assert identity.bundle_digests() == recorded


def test_every_conformance_bundle_verifies_as_before_in_node() -> None:
    recorded = json.loads(identity.RECORD.read_text())["node_bundles"]
    assert identity.node_bundle_digests() == recorded
