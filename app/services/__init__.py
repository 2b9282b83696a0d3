"""Business logic: each public function runs inside the request's transaction."""
