"""API routers, one per resource."""
