"""The Reports pages: server-rendered HTML over the same services as the API."""
