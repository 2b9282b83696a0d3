"""Thin HTTP handlers: parse, authorize, call a service, answer."""
