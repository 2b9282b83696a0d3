"""Pydantic models: API bodies, answers, and (later) the report body and envelope."""
