"""Upper (and lower) bounds of numeric input: ids in URLs, numbers of management commands.

Every number a user sends (a form, a JSON body, a query or path parameter, a command-line option)
has a bound that a real use needs and no more, refused with a message naming the input and the
bound. A number past a database's signed 64-bit integer would otherwise reach the driver and fail
there (``OverflowError`` on SQLite, ``NumericValueOutOfRange`` on PostgreSQL): a 500.

* :data:`ID_MAX`: the largest row id (``BigAutoField``) either database stores.
* :class:`IdConverter`: the ``<id:name>`` URL converter; a larger id matches no route (404).
* :func:`bounded`: an ``argparse`` type for a number in ``[minimum, maximum]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

ID_MAX = 2**63 - 1  # PostgreSQL bigint, SQLite INTEGER
STEP_MAX = 1_000_000  # training steps of one run (the launch form's and API's bound)
SEED_MAX = 2**32 - 1  # numpy's and torch's seeds
TURN_MAX = 1000  # turns of one trajectory (RunConfig's max_turns bound); a review label's turn
REWARD_ABS_MAX = 1e6  # a reward filter's bound: rewards are sums of a few weighted components


class IdConverter:
    """``<id:run_id>``: a positive row id of at most 19 digits and at most :data:`ID_MAX`; any
    other path segment matches no route, so the answer is the project's 404 (the ``int``
    converter passed ``2**63`` on to the database)."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > ID_MAX:
            raise ValueError(f"{value} is past the largest id {ID_MAX}")
        return number

    def to_url(self, value: int) -> str:
        return str(int(value))


def bounded(minimum: float, maximum: float, kind: type = int) -> Callable[[str], float]:
    """An ``argparse`` ``type=`` for a number of ``kind`` (int or float) in ``[minimum,
    maximum]``; a value outside it (or not a number) is refused by argparse as ``argument --x:
    must be an integer from 1 to 50, got '99999'``. The callable carries ``minimum`` and
    ``maximum`` (the test of every command's options reads them)."""
    noun = "an integer" if kind is int else "a number"

    def parse(raw: str):
        try:
            value = kind(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {noun} from {minimum} to {maximum}, got {raw!r}"
            ) from None
        if not minimum <= value <= maximum:  # NaN fails both comparisons: refused too
            raise argparse.ArgumentTypeError(
                f"must be {noun} from {minimum} to {maximum}, got {raw!r}"
            )
        return value

    parse.minimum, parse.maximum = minimum, maximum
    parse.__name__ = kind.__name__  # argparse names the type in some of its messages
    return parse
