"""Reproductions of papers' results (Zhang et al. 2019 Table 1, Ghai & Singh 2024 Table 3, BOPL)
and quality studies (binary streams, high-cardinality features, Personalizer rewards)."""
