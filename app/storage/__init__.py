"""Object stores: S3 through aiobotocore, or a local directory; one interface."""

from app.storage.base import ObjectNotFound, ObjectStore, ObjectStoreUnavailable

__all__ = ["ObjectNotFound", "ObjectStore", "ObjectStoreUnavailable"]
