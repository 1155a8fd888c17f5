"""Task generators: tasks made from real material rather than read from a dataset file.

``repo_bugs`` makes repository tasks (SWE-smith's idea) from a real project's source
distribution: ``sdists`` fetches and unpacks it, ``bugs`` injects faults into its sources,
``suite`` runs its test suite in the sandbox, ``statements`` writes the problem statements.
"""
