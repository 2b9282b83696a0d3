"""What the use cases share and no use case owns: cursors, and the caches of immutable or
stamped things (kept pages, computed-once values)."""
