"""The API's routers, one per resource: models, decisions, policies (and serving), health."""
