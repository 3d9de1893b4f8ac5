"""Timings: boosters against their trees' floor, batch boosters, BOPL, replay, CLI start-up."""
