"""The sandbox side of repository tasks: patches between file trees, the agent's single-commit
git workspace, and grading a final workspace by FAIL_TO_PASS and PASS_TO_PASS test ids in a
fresh sandbox."""
