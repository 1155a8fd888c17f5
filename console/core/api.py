"""What every JSON API of the console answers on bad input: ``{"field": name or null, "error":
"name: message"}`` with a status (400 bad input, 404 unknown, 409 a state that forbids the write),
and the checking of a request body against a serializer, unknown keys refused. The task library's,
the runs' and the review's APIs share it, so a script reads every refusal the same way."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.exceptions import APIException


class ErrorSerializer(serializers.Serializer):
    field = serializers.CharField(allow_null=True, help_text="the input field at fault, or null")
    error = serializers.CharField(help_text="what is wrong, starting with the field's name")


class BadRequest(APIException):
    """``{"field": ..., "error": ...}`` with ``status_code`` (400 unless told)."""

    status_code = 400
    default_code = "invalid"

    def __init__(self, field: str | None, error: str, *, status_code: int = 400) -> None:
        self.status_code = status_code
        self.detail = {"field": field, "error": error}


def first_message(errors) -> str:
    """The first message of a DRF ``errors`` tree."""
    while isinstance(errors, (list, dict)):
        errors = next(iter(errors.values() if isinstance(errors, dict) else errors), "invalid")
    return str(errors)


def validated(serializer_class, data) -> dict:
    """``data`` checked by ``serializer_class``; unknown keys are refused too.

    Raises:
        BadRequest: naming the first field at fault.
    """
    serializer = serializer_class(data=data)
    unknown = sorted(set(data) - set(serializer.fields)) if hasattr(data, "keys") else []
    if unknown:
        raise BadRequest(
            unknown[0], f"{unknown[0]}: unknown field (known: {', '.join(serializer.fields)})"
        )
    if not serializer.is_valid():
        field, errors = next(iter(serializer.errors.items()))
        field = None if field == "non_field_errors" else field
        message = first_message(errors)
        raise BadRequest(field, f"{field}: {message}" if field else message)
    return serializer.validated_data
