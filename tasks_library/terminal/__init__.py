"""Terminal tasks: an instruction, a machine (a Crucible environment and a file tree), a
verifier run on the state the agent leaves, and a reference solution, in Harbor's task layout
(and read from Terminal-Bench's). ``layout`` reads and writes the directories, ``dockerfile``
reads the subset of a Dockerfile that maps onto a Crucible environment."""
