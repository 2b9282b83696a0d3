"""Business logic: the use cases (each runs in the transaction its caller opens, or opens its
own where it says so), the background workers (notifications, the sweep, uploads) and the
caches each use case fills; what several share is in `kit/`."""
