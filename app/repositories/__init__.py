"""All SQL lives here; functions flush, never commit."""
