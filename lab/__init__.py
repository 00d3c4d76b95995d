"""Laboratory helpers for tests and benchmarks (not shipped in the wheel)."""
