"""Typed values of the domain, shared by every layer above the core (no I/O)."""
