"""The transparency log's formats (C2SP signed-note, tlog-checkpoint, tlog-cosignature,
tlog-tiles): pure functions, no database and no web framework."""
