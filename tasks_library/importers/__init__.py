"""Readers that turn a dataset into task records. Each yields dicts of one shape:

``{"task_id", "prompt", "entry_point", "reference_solution", "tests"}``
and raises :class:`ImportFormatError` naming the file, line and field on bad input.
"""

from __future__ import annotations

from core.errors import InputError


class ImportFormatError(InputError):
    """A dataset line (or a task's content) that cannot become a task.

    Args:
        where: the place, ``"FILE:LINE"`` for a dataset line, ``"edit of T v3"`` for an edit,
            ``"--map PAIR"`` for a field mapping; None for the file as a whole.
        detail: what is wrong there, naming the field in words (``"field 'test': ..."``).
        field: that field as data (``"test"``, ``"files.data.csv"``, ``"environment.runtime"``),
            or None.

    ``str(exc)`` is ``"WHERE: DETAIL"``; :attr:`detail` alone is what an edit form shows.
    """

    def __init__(self, where: str | None, detail: str, *, field: str | None = None) -> None:
        super().__init__(f"{where}: {detail}" if where else detail, field=field)
        self.where = where
        self.detail = detail

    @property
    def problem(self) -> str:
        """:attr:`detail` without its leading ``"field 'NAME': "``: what is wrong, for a caller
        that names the field its own way (an edit form, the edit API)."""
        prefix = f"field '{self.field}': "
        return self.detail[len(prefix) :] if self.detail.startswith(prefix) else self.detail
