"""What the use cases share and no use case owns: cursors, the kept list pages and the
computed-once base class. The caches one use case fills (compiled suites, case trees, diffs,
report items) live beside it."""
