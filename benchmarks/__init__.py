"""Scripts that measure Crucible against its peers and print JSON (README: Benchmark bullets).

Each runs as ``.venv/bin/python benchmarks/NAME.py [--quick]``; ``common`` holds what they share.
"""
