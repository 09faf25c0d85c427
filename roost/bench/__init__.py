"""Benchmark suites behind `roost bench`; `scripts/` has a runnable wrapper for each."""
