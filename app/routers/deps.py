"""Dependencies shared by the routers."""

from __future__ import annotations

from fastapi import Request

from app.config import Settings
from app.services.compiled import SuiteCache
from app.storage import ObjectStore


def settings_of(request: Request) -> Settings:
    """The app's settings."""
    settings: Settings = request.app.state.settings
    return settings


def suite_cache(request: Request) -> SuiteCache:
    """The app's compiled-suite cache."""
    cache: SuiteCache = request.app.state.suite_cache
    return cache


def object_store(request: Request) -> ObjectStore:
    """The app's object store."""
    store: ObjectStore = request.app.state.object_store
    return store
