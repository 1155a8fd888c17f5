"""Honest values cross the two-sandbox boundary: standard-library values, class objects, and
instances of the task's own trusted classes (setup code, prompt, test module), each graded
in the real sandboxes and passing. Their hostile lookalikes are in
``test_adversarial_boundary.py``."""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import json
from dataclasses import dataclass

import pytest

from sandboxes import result as R
from sandboxes.grading import PythonGrader
from sandboxes.harness.plaindata import Codec, trusted_classes


@pytest.fixture(scope="module")
def grader():
    grader = PythonGrader()
    yield grader
    grader.close()


@dataclass(frozen=True)
class Honest:
    name: str
    program: str
    tests: str  # the body of check(candidate), indented by 4
    entry: str = "f"
    setup: str = ""
    prompt: str = ""
    module: str = ""  # the test module's top level (hidden helpers, classes)


def check(body: str, module: str = "") -> str:
    return f"{module}\ndef check(candidate):\n{body}"


TREE = (
    "class Node:\n"
    "    def __init__(self, data, left=None, right=None):\n"
    "        self.data, self.left, self.right = data, left, right\n"
)
PAIR = (
    "class Pair(object):\n    def __init__(self, a, b):\n        self.a = a\n        self.b = b\n"
)

HONEST = [
    Honest(
        "counter-compared-with-dict",
        "from collections import Counter\ndef f(s):\n    return Counter(s)\n",
        "    assert candidate('abca') == {'a': 2, 'b': 1, 'c': 1}\n"
        "    assert candidate('abca').most_common(1) == [('a', 2)]\n"
        "    assert candidate('') == {}\n",
    ),
    Honest(
        "defaultdict-of-lists-compared-with-dict",
        "from collections import defaultdict\n"
        "def f(pairs):\n    d = defaultdict(list)\n    for k, v in pairs:\n        d[k].append(v)\n"
        "    return d\n",
        "    assert candidate([(1, 'a'), (2, 'b'), (1, 'c')]) == {1: ['a', 'c'], 2: ['b']}\n"
        "    assert candidate([(1, 'a')])[7] == []  # its factory (list) crossed with it\n",
    ),
    Honest(
        "defaultdict-with-a-lambda-factory",
        "from collections import defaultdict\n"
        "def f(s):\n    d = defaultdict(lambda: 0)\n    for c in s:\n        d[c] += 1\n"
        "    return d\n",
        "    assert candidate('aab') == {'a': 2, 'b': 1}\n"
        "    assert dict(candidate('x')) == {'x': 1}\n",
    ),
    Honest(
        "ordered-dict-keeps-its-order",
        "from collections import OrderedDict\n"
        "def f(keys):\n    d = OrderedDict((k, len(k)) for k in keys)\n"
        "    d.move_to_end(keys[0])\n    return d\n",
        "    from collections import OrderedDict\n"
        "    expected = OrderedDict([('bb', 2), ('ccc', 3), ('a', 1)])\n"
        "    assert candidate(['a', 'bb', 'ccc']) == expected\n"
        "    assert list(candidate(['a', 'bb'])) == ['bb', 'a']\n"
        "    assert candidate(['a', 'bb']) == {'a': 1, 'bb': 2}\n",
    ),
    Honest(
        "deque-with-maxlen",
        "from collections import deque\ndef f(xs, n):\n    return deque(xs, maxlen=n)\n",
        "    from collections import deque\n"
        "    assert candidate([1, 2, 3, 4], 2) == deque([3, 4])\n"
        "    assert candidate([1, 2, 3], 5).maxlen == 5\n"
        "    assert list(candidate([1, 2], None)) == [1, 2]\n",
    ),
    Honest(
        "namedtuple-compared-with-tuple-and-by-field",
        "from collections import namedtuple\nPoint = namedtuple('Point', 'x y')\n"
        "def f(a, b):\n    return Point(a, b)\n",
        "    assert candidate(1, 2) == (1, 2)\n"
        "    assert candidate(1, 2).y == 2\n"
        "    assert candidate(3, 4)._asdict() == {'x': 3, 'y': 4}\n",
    ),
    Honest(
        "typing-namedtuple-of-the-prompt",
        "from typing import NamedTuple\n\nclass Span(NamedTuple):\n    start: int\n    end: int\n\n"
        "    def length(self):\n        return self.end - self.start\n\n"
        "def f(a, b):\n    return Span(min(a, b), max(a, b))\n",
        "    assert candidate(5, 2) == Span(2, 5)\n"
        "    assert isinstance(candidate(5, 2), Span) and candidate(1, 4).length() == 3\n",
        prompt="from typing import NamedTuple\n\nclass Span(NamedTuple):\n    start: int\n"
        "    end: int\n\n    def length(self):\n        return self.end - self.start\n\n"
        "def f(a, b):\n    '''The span between a and b.'''\n",
    ),
    Honest(
        "decimal-and-fraction",
        "from decimal import Decimal\nfrom fractions import Fraction\n"
        "def f(a, b):\n    return Decimal(a) + Decimal(b), Fraction(1, 3) * 3\n",
        "    from decimal import Decimal\n"
        "    total, one = candidate('0.10', '0.20')\n"
        "    assert total == Decimal('0.3') and str(total) == '0.30'\n"
        "    assert one == 1 and type(one).__name__ == 'Fraction'\n",
    ),
    Honest(
        "complex-bytes-bytearray-frozenset-range",
        "def f(n):\n    return (complex(n, -n), bytes(range(n)), bytearray(b'ab'),"
        " frozenset(range(n)), range(0, n, 2))\n",
        "    c, b, ba, fs, r = candidate(3)\n"
        "    assert c == 3 - 3j and b == b'\\x00\\x01\\x02' and ba == b'ab'\n"
        "    assert fs == frozenset({0, 1, 2}) and type(fs) is frozenset\n"
        "    assert r == range(0, 3, 2) and list(r) == [0, 2]\n",
    ),
    Honest(
        "naive-date-time-datetime-timedelta",
        "import datetime as dt\n"
        "def f(y, m, d):\n    day = dt.date(y, m, d)\n"
        "    return day, dt.time(9, 30), dt.datetime(y, m, d, 12), day - dt.date(y, 1, 1)\n",
        "    import datetime as dt\n"
        "    day, at, stamp, gone = candidate(2024, 3, 1)\n"
        "    assert day == dt.date(2024, 3, 1) and day.weekday() == 4\n"
        "    assert at == dt.time(9, 30) and stamp == dt.datetime(2024, 3, 1, 12)\n"
        "    assert gone == dt.timedelta(days=60)\n",
    ),
    Honest(
        "timezone-aware-datetimes",
        "import datetime as dt\nfrom zoneinfo import ZoneInfo\n"
        "def f(hours):\n    tz = dt.timezone(dt.timedelta(hours=hours), 'Local')\n"
        "    return (dt.datetime(2024, 6, 1, 12, tzinfo=tz),\n"
        "            dt.datetime(2024, 6, 1, 12, tzinfo=ZoneInfo('Europe/Paris')),\n"
        "            dt.time(8, 0, tzinfo=dt.timezone.utc))\n",
        "    import datetime as dt\n"
        "    local, paris, morning = candidate(2)\n"
        "    assert local == paris  # the same instant: 10:00 UTC (Paris is UTC+2 in June)\n"
        "    assert local.utcoffset() == dt.timedelta(hours=2) and local.tzname() == 'Local'\n"
        "    assert str(paris.tzinfo) == 'Europe/Paris' and paris.utcoffset().seconds == 7200\n"
        "    assert morning.tzinfo == dt.timezone.utc\n",
    ),
    Honest(
        "builtin-classes-as-arguments-and-results",
        "def f(values, kind):\n    return all(isinstance(v, kind) for v in values)\n"
        "def kind_of(v):\n    return type(v)\n",
        "    import collections\n"
        "    assert candidate((5, 6, 7), int) == True\n"
        "    assert candidate((5, 'x'), int) == False\n"
        "    assert candidate([collections.Counter()], dict) == True\n"
        "    assert kind_of(3.5) is float\n"
        "    assert kind_of(collections.Counter()) is collections.Counter\n",
    ),
    Honest(
        "setup-tree-nodes-as-arguments",
        "def f(node):\n    if node is None:\n        return 0\n"
        "    return 1 + max(f(node.left), f(node.right))\n",
        "    assert candidate(root) == 3\n    assert candidate(Node(7)) == 1\n"
        "    assert candidate(None) == 0\n",
        setup=TREE + "root = Node(1, Node(2, Node(4)), Node(3))\n",
    ),
    Honest(
        "setup-nodes-returned-after-a-change",
        "def f(node):\n    if node is not None:\n"
        "        node.left, node.right = f(node.right), f(node.left)\n    return node\n",
        "    flipped = candidate(Node(1, Node(2), Node(3)))\n"
        "    assert type(flipped) is Node and flipped.left.data == 3 and flipped.right.data == 2\n"
        "    assert candidate(Node(5)).left is None\n",
        setup=TREE,
    ),
    Honest(
        "program-builds-trusted-instances-by-the-setup-class",
        "def f(values):\n    head = None\n    for v in reversed(values):\n"
        "        head = Node(v, head)\n    return head\n",
        "    head = candidate([1, 2, 3])\n"
        "    assert head == Node(1, Node(2, Node(3)))\n"
        "    assert candidate([]) is None\n",
        setup="class Node:\n    def __init__(self, data, next=None):\n"
        "        self.data, self.next = data, next\n"
        "    def __eq__(self, other):\n"
        "        return type(other) is Node and (self.data, self.next) == (\n"
        "            other.data, other.next)\n",
    ),
    Honest(
        "prompt-class-repeated-by-the-program-crosses-back",
        "class Money:\n    def __init__(self, cents):\n        self.cents = cents\n"
        "    def __eq__(self, other):\n"
        "        return type(other) is Money and self.cents == other.cents\n"
        "\n\ndef f(a, b):\n    return Money(a.cents + b.cents)\n",
        "    assert candidate(Money(150), Money(75)) == Money(225)\n",
        prompt="class Money:\n    def __init__(self, cents):\n        self.cents = cents\n"
        "    def __eq__(self, other):\n"
        "        return type(other) is Money and self.cents == other.cents\n"
        "\n\ndef f(a, b):\n    '''The sum of two amounts.'''\n",
    ),
    Honest(
        "reference-helper-class-in-setup-mbpp-601",
        PAIR + "def max_chain_length(arr, n):\n    arr = sorted(arr, key=lambda p: p.b)\n"
        "    count, end = 0, float('-inf')\n    for p in arr[:n]:\n"
        "        if p.a > end:\n            count, end = count + 1, p.b\n    return count\n",
        "    pairs = [Pair(5, 24), Pair(15, 25), Pair(27, 40), Pair(50, 60)]\n"
        "    assert max_chain_length(pairs, 4) == 3\n"
        "    assert max_chain_length([Pair(1, 2), Pair(3, 4), Pair(5, 6), Pair(7, 8)], 4) == 4\n",
        entry="max_chain_length",
        setup=PAIR,
    ),
    Honest(
        "tests-use-a-module-the-reference-imports",
        "import sys\ndef f(xs):\n    return min(xs, default=sys.maxsize)\n",
        "    assert candidate([]) == sys.maxsize\n    assert candidate([3, 1]) == 1\n",
        setup="import sys\n",
    ),
    Honest(
        "tests-call-a-second-function-of-the-program",
        "def f(n):\n    return n * 2\ndef g(n):\n    return f(n) + 1\n",
        "    assert candidate(2) == 4\n    assert g(2) == 5\n",
    ),
    Honest(
        "frozen-dataclass-enum-and-slots-of-the-setup",
        "def f(x, y, color):\n    p = Point(x, y)\n    s = Slotted(x)\n"
        "    return p, color, s, Color.GREEN if color is Color.RED else Color.RED\n",
        "    p, color, s, other = candidate(1, 2, Color.RED)\n"
        "    assert p == Point(1, 2) and color is Color.RED and other is Color.GREEN\n"
        "    assert type(s) is Slotted and s.value == 1 and s.double() == 2\n",
        setup="import dataclasses, enum\n"
        "@dataclasses.dataclass(frozen=True)\nclass Point:\n    x: int\n    y: int\n"
        "class Color(enum.Enum):\n    RED = 1\n    GREEN = 2\n"
        "class Slotted:\n    __slots__ = ('value',)\n    def __init__(self, value):\n"
        "        self.value = value\n    def double(self):\n        return 2 * self.value\n",
    ),
    Honest(
        "hidden-test-module-class-goes-there-and-back",
        "def f(item):\n    item.seen = True\n    return item\n",
        "    back = candidate(Probe(4))\n"
        "    assert type(back) is Probe and back.seen is True\n"
        "    assert back.n == 4 and back.twice() == 8\n",
        module="class Probe:\n    seen = False\n    def __init__(self, n):\n        self.n = n\n"
        "    def twice(self):\n        return 2 * self.n\n",
    ),
    Honest(
        "nested-standard-library-values",
        "from collections import Counter, namedtuple\nfrom decimal import Decimal\n"
        "Item = namedtuple('Item', 'name price')\n"
        "def f(rows):\n    return {k: [Item(k, Decimal(p)) for p in ps] for k, ps in rows.items()},"
        " Counter(rows)\n",
        "    from decimal import Decimal\n"
        "    items, counts = candidate({'a': ['1.5', '2']})\n"
        "    assert items == {'a': [('a', Decimal('1.5')), ('a', Decimal('2'))]}\n"
        "    assert items['a'][1].price == 2 and counts == {'a': ['1.5', '2']}\n",
    ),
]


@pytest.mark.parametrize("case", HONEST, ids=[c.name for c in HONEST])
def test_honest_value_crosses_and_passes(grader, case):
    result = grader.grade(
        case.program,
        check(case.tests, case.module),
        case.entry,
        prompt=case.prompt,
        setup=case.setup,
    )
    assert result.status == R.OK, (
        result.status,
        [(t.id, t.error) for t in result.tests if not t.passed],
        result.detail,
        result.stderr[-500:],
    )
    assert result.tests and all(t.passed for t in result.tests)


def test_every_honest_case_is_also_correct_in_one_process():
    """The cases' expectations are right: run in one namespace (as MBPP's own harness does),
    every assertion holds, so a pass above is the boundary's doing, not a lenient test."""
    for case in HONEST:
        namespace: dict = {"__name__": "__main__"}
        exec(case.prompt, namespace)
        exec(case.setup, namespace)
        exec(case.program, namespace)
        exec(check(case.tests, case.module), namespace)
        namespace["check"](namespace[case.entry])


def test_round_trip_through_json_keeps_type_and_value():
    """The codec alone: each value comes back equal and of exactly its type."""
    namespace = {"__name__": "__main__"}
    exec(TREE, namespace)
    codec = Codec(trusted_classes(namespace))
    values = [
        collections.Counter("hello"),
        collections.OrderedDict(b=1, a=2),
        collections.defaultdict(set, {1: {2}}),
        collections.deque([1, (2, 3)], 4),
        decimal.Decimal("-0.000"),
        fractions.Fraction(-7, 21),
        datetime.datetime(2024, 10, 27, 2, 30, fold=1),
        datetime.timezone(datetime.timedelta(minutes=-90)),
        {frozenset({1}): b"x", (1, 2): bytearray(b"y")},
        [int, float, decimal.Decimal, namespace["Node"]],
        range(10, 0, -3),
    ]
    for value in values:
        back = codec.decode(json.loads(json.dumps(codec.encode(value))))
        assert back == value and type(back) is type(value), value
    pair = collections.namedtuple("P", "x y")(1, [2])
    back = codec.decode(json.loads(json.dumps(codec.encode(pair))))
    assert back == pair and type(back).__name__ == "P" and back._fields == ("x", "y")
    node = codec.decode(json.loads(json.dumps(codec.encode(namespace["Node"](1, None, 2)))))
    assert type(node) is namespace["Node"] and vars(node) == {"data": 1, "left": None, "right": 2}
