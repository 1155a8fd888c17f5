"""Task validation helpers that need no sandbox: mutants of a reference solution, a prompt's
examples."""
