"""The aggregation engine: pure, deterministic, numpy; no I/O, no web or database imports."""
