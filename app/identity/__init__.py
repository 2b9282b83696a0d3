"""Who is asking: bearer tokens and principals, revocations, the permissions a token may hold."""
