"""The bundle conformance set: `<case>/bundle.jsonl.gz`, `README.md`, `expected.json`."""
