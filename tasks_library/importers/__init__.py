"""Readers that turn a dataset into task records. Each yields dicts of one shape:

``{"task_id", "prompt", "entry_point", "reference_solution", "tests"}``
and raises :class:`ImportFormatError` naming the file, line and field on bad input.
"""

from __future__ import annotations


class ImportFormatError(ValueError):
    """A dataset line that cannot become a task; the message names file, line and field."""
