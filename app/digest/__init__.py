"""Canonical JSON, strict JSON, SHA-256, Merkle trees, manifest digests and signed statements."""
