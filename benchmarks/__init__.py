"""Benchmarks (./scripts/bench NAME); not shipped in the wheel."""
