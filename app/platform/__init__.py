"""What the service runs on: settings, the database and its replicas, object stores, outbound
HTTP, metrics, memory, worker processes, the embedded PostgreSQL."""
