"""The one error a service raises when it refuses its input: what is wrong, and which field.

Services (``services.py`` of every app, the run configuration, the importers) raise
:class:`InputError` (or a subclass that says where the input came from: an imported file's line,
a run configuration); each caller maps it to its own form without reading the text back:

* a Django form: :func:`form_add_error` puts the message on ``exc.field`` when the form has it;
* the REST API: 400 ``{"field": exc.field, "error": str(exc)}``;
* a management command: ``CommandError(str(exc))``.

``str(exc)`` is the whole message, which names the field in words for a reader (``"reason:
write why..."``, ``"bad.jsonl:3: field 'test': ..."``); ``exc.field`` is the same field as data.
"""

from __future__ import annotations


class InputError(ValueError):
    """Input a service refuses.

    Args:
        message: what is wrong and what to write instead, naming the input for a reader.
        field: the input at fault as the caller's form or API names it (``prompt``,
            ``reason``, ``files.data.csv``...), or None when no single field is.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def form_add_error(form, exc: InputError, field: str | None = None) -> None:
    """Show ``exc`` on a Django ``form``: on ``field`` (default ``exc.field``) when the form has a
    field of that name, else as an error of the whole form. On a field, the message loses its
    leading ``"<field>: "``: the field's label already says which input it is about, and the
    service's name for it is not the reader's."""
    name = field if field is not None else exc.field
    if name not in form.fields:
        form.add_error(None, exc.message)
        return
    message = exc.message
    for prefix in {f"{exc.field}: ", f"{name}: "} - {"None: "}:
        if message.startswith(prefix):
            message = message[len(prefix) :]
            break
    form.add_error(name, message)
