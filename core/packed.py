"""Token ids and log-probs stored as packed binary arrays, not JSON.

A realistic agent turn carries a few hundred sampled ids and a thousand or more observation ids.
As JSON each id costs 6-7 bytes to write and a parse on every write (``jsonb``) and read; packed,
an id is 4 bytes (``int32``: every vocabulary in use is below 2**31) and a log-prob 8 (``float64``:
exactly the Python float the sampler returned, so a resumed run reads back the very values it
stored). Encoding is one ``array.tobytes`` call, so the trajectory writer
(``training.services.step_record``) spends its time on the text, not the numbers.

The column is PostgreSQL ``bytea`` or an SQLite BLOB, little-endian on every machine; Python sees
a list, as it did with the JSON field. Length in the database: :class:`PackedLength`.
"""

from __future__ import annotations

import array
import json
import sys

from django.db import models
from django.db.models import Func, IntegerField

TYPECODES = {"i": 4, "d": 8}
"""The element types: ``i`` int32 (token ids), ``d`` float64 (log-probs); bytes per element."""

_SWAP = sys.byteorder != "little"


def pack(values, typecode: str) -> bytes:
    """``values`` (a sequence of ints or floats) as little-endian bytes of ``typecode``.

    Raises:
        OverflowError: an id outside int32.
        TypeError: an element of the wrong type (a string, None).
    """
    packed = array.array(typecode, values)
    if _SWAP:
        packed.byteswap()
    return packed.tobytes()


def unpack(data: bytes | memoryview, typecode: str) -> list:
    """The list :func:`pack` packed.

    Raises:
        ValueError: ``data``'s length is not a multiple of the element size.
    """
    values = array.array(typecode)
    values.frombytes(bytes(data))
    if _SWAP:
        values.byteswap()
    return values.tolist()


class PackedArrayField(models.BinaryField):
    """A list of ints (``typecode="i"``) or floats (``"d"``) in a binary column.

    The default is the empty list. Assigning anything but a list, tuple or ``array.array`` of the
    element type raises ``TypeError`` at save time, naming the field.
    """

    def __init__(self, *args, typecode: str = "i", **kwargs):
        if typecode not in TYPECODES:
            raise ValueError(f"typecode must be one of {sorted(TYPECODES)}, not {typecode!r}")
        self.typecode = typecode
        kwargs.setdefault("default", list)
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs["typecode"] = self.typecode
        if kwargs.get("default") is list:
            del kwargs["default"]
        kwargs.pop("editable", None)
        return name, path, args, kwargs

    def from_db_value(self, value, expression, connection):
        return None if value is None else unpack(value, self.typecode)

    def to_python(self, value):
        if value is None or isinstance(value, list):
            return value
        if isinstance(value, str):  # value_to_string's form (fixtures, dumpdata)
            return json.loads(value)
        if isinstance(value, (bytes, bytearray, memoryview)):
            return unpack(value, self.typecode)
        return list(value)

    def get_db_prep_value(self, value, connection, prepared=False):
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return super().get_db_prep_value(value, connection, prepared)
        try:
            data = pack(value, self.typecode)
        except (TypeError, OverflowError) as exc:
            raise TypeError(f"{self.name}: expected a list of {self._element}, {exc}") from exc
        return connection.Database.Binary(data)

    @property
    def _element(self) -> str:
        return "int32 ids" if self.typecode == "i" else "floats"

    def value_to_string(self, obj):
        return json.dumps(self.value_from_object(obj))


class PackedLength(Func):
    """The element count of a :class:`PackedArrayField` column, in the database (its byte length
    over the element size: PostgreSQL ``octet_length``, SQLite ``length`` of a BLOB)."""

    output_field = IntegerField()

    def __init__(self, expression, *, typecode: str = "i", **extra):
        self.size = TYPECODES[typecode]
        super().__init__(expression, **extra)

    def as_sql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return f"(COALESCE(LENGTH({sql}), 0) / {self.size})", params

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return f"(COALESCE(OCTET_LENGTH({sql}), 0) / {self.size})", params
