"""Every script under benchmarks/ in its quick mode (README: Benchmarks)."""
