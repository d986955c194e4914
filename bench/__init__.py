"""Benchmarks (not part of the test run): `make bench`."""
