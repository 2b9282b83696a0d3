"""The reproducibility bundle v1: its format and its verifier (no web or database imports)."""
