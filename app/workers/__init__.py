"""Background work of a running service: the verification sweep, peer notifications, witness
pushes."""
