"""Object stores: S3 through aiobotocore, or a local directory; one interface."""

from app.platform.storage.base import (
    MultipartUpload,
    ObjectNotFound,
    ObjectStore,
    ObjectStoreUnavailable,
)

__all__ = ["MultipartUpload", "ObjectNotFound", "ObjectStore", "ObjectStoreUnavailable"]
