"""What every JSON API of the console answers on bad input: ``{"field": name or null, "error":
"name: message"}`` with a status (400 bad input, 404 unknown, 409 a state that forbids the write),
and the checking of a request body against a serializer, unknown keys refused. The task library's,
the runs' and the review's APIs share it, so a script reads every refusal the same way."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import pagination, serializers
from rest_framework.exceptions import APIException

from core.bounds import ID_MAX

PAGE_MAX = 1_000_000  # pages of a list: 50 million rows at 50 a page
OFFSET_MAX = 1_000_000  # rows skipped by a limit/offset list (turns of one trajectory)


class ErrorSerializer(serializers.Serializer):
    field = serializers.CharField(allow_null=True, help_text="the input field at fault, or null")
    error = serializers.CharField(help_text="what is wrong, starting with the field's name")
    detail = serializers.CharField(
        required=False,
        help_text="the same message where DRF raised it (authentication, permission, not found)",
    )


def paged(serializer_class: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The schema of a page of ``serializer_class`` rows as :class:`PageNumberPagination` answers
    it (for an ``APIView`` that paginates by hand: drf-spectacular only sees generic views')."""
    name = serializer_class.__name__.removesuffix("Serializer")
    return type(
        f"Paged{name}Serializer",
        (serializers.Serializer,),
        {
            "count": serializers.IntegerField(help_text="rows in every page"),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": serializer_class(many=True),
        },
    )


def exception_handler(exc, context):
    """DRF's handler, then every error body in the one shape ``{"field", "error"}`` (DRF's own
    ``{"detail": ...}`` keeps its ``detail`` beside them; a serializer's or a form's
    ``{name: [messages]}`` becomes its first field and message)."""
    from rest_framework.views import exception_handler as drf_handler  # noqa: PLC0415 (DRF's)

    response = drf_handler(exc, context)
    if response is None or not isinstance(response.data, (dict, list)):
        return response
    data = response.data
    if isinstance(data, dict) and "error" in data:
        return response
    if isinstance(data, dict) and set(data) == {"detail"}:
        response.data = {"field": None, "error": str(data["detail"]), "detail": str(data["detail"])}
        return response
    if isinstance(data, dict) and data:
        field, errors = next(iter(data.items()))
        field = None if field in ("non_field_errors", "__all__") else str(field)
        message = first_message(errors)
        response.data = {"field": field, "error": f"{field}: {message}" if field else message}
    else:
        response.data = {"field": None, "error": first_message(data) if data else "invalid"}
    return response


def document_error_responses(result, generator, request, public):
    """drf-spectacular post-processing: every operation documents the errors it can answer, in
    the shape of :class:`ErrorSerializer` (component ``Error``): 401 and 403 (every operation
    needs a sign-in, and a role for its write), 404 where the path names something or a page
    may be past the last, 400 where there is input (parameters or a body)."""
    error = {"$ref": "#/components/schemas/Error"}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            wanted = {"401": "not signed in, or bad credentials", "403": "refused: the role"}
            parameters = operation.get("parameters", [])
            if any(p.get("in") == "path" for p in parameters):
                wanted["404"] = "nothing of that id or name"
            if any(p.get("name") in ("page", "offset") for p in parameters):
                wanted["404"] = "a page past the last"
            if parameters or "requestBody" in operation:
                wanted["400"] = "bad input, naming the field"
            for code, why in wanted.items():
                responses.setdefault(
                    code,
                    {"description": why, "content": {"application/json": {"schema": error}}},
                )
    return result


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


def bounded_query_int(request, name: str, *, minimum: int, maximum: int, default: int) -> int:
    """Query parameter ``name`` as an int in ``[minimum, maximum]`` (``default`` when absent).

    Raises:
        BadRequest: naming ``name`` and the bounds, for text or a number outside them.
    """
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not minimum <= value <= maximum:
        raise BadRequest(name, f"{name}: give an integer from {minimum} to {maximum}, got {raw!r}")
    return value


def int_parameter(name: str, *, minimum: int = 0, maximum: int = ID_MAX, **kwargs):
    """A query parameter of the OpenAPI schema: an integer with its bounds."""
    schema = {"type": "integer", "minimum": minimum, "maximum": maximum}
    return OpenApiParameter(name, schema, **kwargs)


def _bounded_schema_parameters(parameters: list[dict], bounds: dict[str, tuple[int, int]]):
    for parameter in parameters:
        if parameter["name"] in bounds:
            low, high = bounds[parameter["name"]]
            parameter["schema"] = {**parameter["schema"], "minimum": low, "maximum": high}
    return parameters


class PageNumberPagination(pagination.PageNumberPagination):
    """DRF's page numbers with bounds: ``page`` in 1..:data:`PAGE_MAX` (400 naming the parameter
    otherwise); ``page_size`` capped at ``max_page_size``; both bounds in the schema."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def paginate_queryset(self, queryset, request, view=None):
        # page_size past max_page_size is capped, as DRF documents; the page number is refused.
        bounded_query_int(request, self.page_query_param, minimum=1, maximum=PAGE_MAX, default=1)
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view):
        return _bounded_schema_parameters(
            super().get_schema_operation_parameters(view),
            {
                self.page_query_param: (1, PAGE_MAX),
                self.page_size_query_param: (1, self.max_page_size),
            },
        )


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """DRF's limit and offset with bounds: ``offset`` in 0..:data:`OFFSET_MAX` (400 naming the
    parameter otherwise); ``limit`` capped at ``max_limit``; both bounds in the schema."""

    max_limit = 200

    def paginate_queryset(self, queryset, request, view=None):
        # limit past max_limit is capped, as DRF documents; the offset is refused.
        bounded_query_int(
            request, self.offset_query_param, minimum=0, maximum=OFFSET_MAX, default=0
        )
        return super().paginate_queryset(queryset, request, view)

    def get_schema_operation_parameters(self, view):
        return _bounded_schema_parameters(
            super().get_schema_operation_parameters(view),
            {self.limit_query_param: (1, self.max_limit), self.offset_query_param: (0, OFFSET_MAX)},
        )
