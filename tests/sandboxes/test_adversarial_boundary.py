"""The adversarial corpus, at the plain-data boundary: hostile submissions that try to smuggle
an object through each type that now crosses (standard-library values, named tuples, class
objects, the task's trusted classes), or forge what crosses. Every one answers wrongly, so
any pass is a false pass: there must be none, and the host must be left as it was.

The honest counterparts are in ``test_boundary_honest_values.py``.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import json
from dataclasses import dataclass

import pytest

from sandboxes import result as R
from sandboxes.grading import run_python_tests
from sandboxes.harness.plaindata import Codec, NotPlainData, trusted_classes
from sandboxes.process import Limits
from tests.sandboxes.hostcheck import sandbox_leftovers

YES = (
    "    def __eq__(self, other):\n        return True\n"
    "    def __ne__(self, other):\n        return False\n"
    "    __hash__ = object.__hash__\n"
)
NODE = (
    "class Node:\n"
    "    def __init__(self, data, next=None):\n"
    "        self.data, self.next = data, next\n"
    "    def __eq__(self, other):\n"
    "        return type(other) is Node and (self.data, self.next) == (other.data, other.next)\n"
    "    def total(self):\n"
    "        return self.data + (self.next.total() if self.next else 0)\n"
)


@dataclass(frozen=True)
class Smuggle:
    name: str
    program: str
    tests: str  # the body of check(candidate), indented by 4; the honest answer passes it
    setup: str = ""
    error: str = ""  # a text the first failing test's error must hold, when it says why


def forge(payload: dict) -> str:
    """A submission that writes its own reply line to the tests' side (fd 5) and exits."""
    line = json.dumps({"ok": payload}) + "\n"
    return f"import os\ndef f(*args):\n    os.write(5, {line.encode()!r})\n    os._exit(0)\n"


CORPUS = [
    # -- standard-library subclasses with a patched __eq__ -------------------------------
    Smuggle(
        "counter-subclass-always-equal",
        f"from collections import Counter\nclass C(Counter):\n{YES}def f(s):\n    return C()\n",
        "    assert candidate('aab') == {'a': 2, 'b': 1}\n",
        error="not plain data",
    ),
    Smuggle(
        "ordereddict-subclass-always-equal",
        f"from collections import OrderedDict\nclass O(OrderedDict):\n{YES}"
        "def f(s):\n    return O()\n",
        "    assert candidate('ab') == {'a': 1, 'b': 1}\n",
        error="not plain data",
    ),
    Smuggle(
        "defaultdict-subclass-always-equal",
        f"from collections import defaultdict\nclass D(defaultdict):\n{YES}"
        "def f(s):\n    return D(int)\n",
        "    assert candidate('ab') == {'a': 1, 'b': 1}\n",
        error="not plain data",
    ),
    Smuggle(
        "defaultdict-with-a-hostile-factory",
        f"from collections import defaultdict\nclass Yes:\n{YES}"
        "def f(s):\n    return defaultdict(Yes)\n",
        "    assert candidate('ab')['a'] == 1\n    assert candidate('ab')['b'] == 1\n",
        error="KeyError",
    ),
    Smuggle(
        "defaultdict-factory-returning-the-answer",
        "from collections import defaultdict\ndef f(s):\n    return defaultdict(lambda: 1)\n",
        "    assert candidate('ab')['a'] == 1\n    assert candidate('ab')['b'] == 1\n",
        error="KeyError",
    ),
    Smuggle(
        "defaultdict-with-a-missing-override",
        "from collections import defaultdict\nclass D(defaultdict):\n"
        "    def __missing__(self, key):\n        return 1\n"
        "def f(s):\n    return D()\n",
        "    assert candidate('ab')['a'] == 1\n",
        error="not plain data",
    ),
    Smuggle(
        "deque-subclass-always-equal",
        f"from collections import deque\nclass Q(deque):\n{YES}def f(n):\n    return Q()\n",
        "    from collections import deque\n    assert candidate(2) == deque([0, 1])\n",
        error="not plain data",
    ),
    # -- named tuples ----------------------------------------------------------------------
    Smuggle(
        "namedtuple-lookalike-tuple-subclass",
        f"class P(tuple):\n    _fields = ('x', 'y')\n{YES}def f(a, b):\n    return P((0, 0))\n",
        "    assert candidate(1, 2) == (1, 2)\n",
        error="not plain data",
    ),
    Smuggle(
        "namedtuple-subclass-with-eq",
        f"from collections import namedtuple\nclass P(namedtuple('P', 'x y')):\n{YES}"
        "def f(a, b):\n    return P(0, 0)\n",
        "    assert candidate(1, 2) == (1, 2)\n",
        error="not plain data",
    ),
    Smuggle(
        "namedtuple-patched-after-creation",
        f"from collections import namedtuple\nP = namedtuple('P', 'x y')\nclass Y:\n{YES}"
        "P.__eq__ = Y.__eq__\nP.__ne__ = Y.__ne__\ndef f(a, b):\n    return P(0, 0)\n",
        "    assert candidate(1, 2) == (1, 2)\n",
        error="not plain data",
    ),
    Smuggle(
        "namedtuple-holding-an-always-equal-item",
        f"from collections import namedtuple\nP = namedtuple('P', 'x y')\nclass Yes:\n{YES}"
        "def f(a, b):\n    return P(Yes(), Yes())\n",
        "    assert candidate(1, 2) == (1, 2)\n",
        error="not plain data",
    ),
    # -- numbers and times -----------------------------------------------------------------
    Smuggle(
        "decimal-subclass-always-equal",
        f"from decimal import Decimal\nclass D(Decimal):\n{YES}def f(a):\n    return D(0)\n",
        "    from decimal import Decimal\n    assert candidate('1.5') == Decimal('1.5')\n",
        error="not plain data",
    ),
    Smuggle(
        "fraction-subclass-always-equal",
        f"from fractions import Fraction\nclass F(Fraction):\n{YES}def f(a):\n    return F(0)\n",
        "    assert candidate(3) == 3\n",
        error="not plain data",
    ),
    Smuggle(
        "complex-subclass-always-equal",
        f"class Z(complex):\n{YES}def f(a):\n    return Z(0)\n",
        "    assert candidate(2) == 2 + 2j\n",
        error="not plain data",
    ),
    Smuggle(
        "datetime-subclass-always-equal",
        f"import datetime\nclass T(datetime.datetime):\n{YES}def f(y):\n    return T(2000, 1, 1)\n",
        "    import datetime\n    assert candidate(2024) == datetime.datetime(2024, 1, 1)\n",
        error="not plain data",
    ),
    Smuggle(
        "date-subclass-always-equal",
        f"import datetime\nclass T(datetime.date):\n{YES}def f(y):\n    return T(2000, 1, 1)\n",
        "    import datetime\n    assert candidate(2024) == datetime.date(2024, 1, 1)\n",
        error="not plain data",
    ),
    Smuggle(
        "timedelta-subclass-always-equal",
        f"import datetime\nclass T(datetime.timedelta):\n{YES}def f(d):\n    return T(0)\n",
        "    import datetime\n    assert candidate(3) == datetime.timedelta(days=3)\n",
        error="not plain data",
    ),
    Smuggle(
        "hostile-tzinfo",
        "import datetime\nclass Zone(datetime.tzinfo):\n"
        "    def utcoffset(self, d):\n        return datetime.timedelta(hours=5)\n"
        "def f(h):\n    return datetime.datetime(2024, 1, 1, 0, tzinfo=Zone())\n",
        "    import datetime\n"
        "    utc = datetime.timezone.utc\n"
        "    assert candidate(5) == datetime.datetime(2024, 1, 1, 5, tzinfo=utc)\n",
        error="not plain data",
    ),
    Smuggle(
        "frozenset-and-bytes-subclasses",
        f"class S(frozenset):\n{YES}class B(bytes):\n{YES}def f(n):\n    return S(), B()\n",
        "    assert candidate(2)[0] == frozenset({0, 1})\n"
        "    assert candidate(2)[1] == b'\\x00\\x01'\n",
        error="not plain data",
    ),
    # -- class objects -------------------------------------------------------------------
    Smuggle(
        "a-class-with-a-metaclass-equal-to-int",
        f"class Meta(type):\n{YES}class Fake(metaclass=Meta):\n    pass\n"
        "def f(v):\n    return Fake\n",
        "    assert candidate(3) == int\n",
        error="not plain data",
    ),
    Smuggle(
        "a-subclass-of-int-as-a-class",
        "class MyInt(int):\n    pass\ndef f(v):\n    return MyInt\n",
        "    assert candidate(3) is int\n",
        error="not plain data",
    ),
    # -- the task's trusted classes --------------------------------------------------------
    Smuggle(
        "own-class-with-the-trusted-name",
        f"class Node:\n    def __init__(self, data, next=None):\n        self.data = data\n{YES}"
        "def f(values):\n    return Node(0)\n",
        "    assert candidate([1, 2]) == Node(1, Node(2))\n",
        setup=NODE,
        error="not plain data",
    ),
    Smuggle(
        "trusted-class-patched-in-the-program-sandbox",
        "Node.__eq__ = lambda self, other: True\ndef f(values):\n    return Node(0)\n",
        "    assert candidate([1, 2]) == Node(1, Node(2))\n",
        setup=NODE,
        error="AssertionError",
    ),
    Smuggle(
        "trusted-class-redefined-verbatim-then-patched",
        NODE + "Node.__eq__ = lambda self, other: True\ndef f(values):\n    return Node(0)\n",
        "    assert candidate([1, 2]) == Node(1, Node(2))\n",
        setup=NODE,
        error="AssertionError",
    ),
    Smuggle(
        "trusted-instance-hiding-a-method",
        "def f(values):\n    node = Node(0)\n    node.total = int\n    return node\n",
        "    assert candidate([1, 2]).total() == 3\n",
        setup=NODE,
        error="would hide",
    ),
    Smuggle(
        "trusted-instance-holding-an-always-equal-object",
        f"class Yes:\n{YES}def f(values):\n    return Node(Yes())\n",
        "    assert candidate([1]) == Node(1)\n",
        setup=NODE,
        error="not plain data",
    ),
    Smuggle(
        "trusted-instance-with-reduce-and-getstate-tricks",
        "import os\n"
        "Node.__reduce__ = lambda self: (os.system, ('touch /tmp/pwned',))\n"
        "Node.__getstate__ = lambda self: {'data': 1, 'next': None}\n"
        "def f(values):\n    return Node(0)\n",
        "    assert candidate([1]) == Node(1)\n",
        setup=NODE,
        error="AssertionError",
    ),
    Smuggle(
        "own-enum-with-the-trusted-name",
        f"import enum\nclass Color(enum.Enum):\n    RED = 1\n{YES}"
        "def f(c):\n    return Color.RED\n",
        "    assert candidate('green') is Color.GREEN\n"
        "    assert candidate('green') == Color.GREEN\n",
        setup="import enum\nclass Color(enum.Enum):\n    RED = 1\n    GREEN = 2\n",
        error="not plain data",
    ),
    Smuggle(
        "an-object-with-reduce-that-runs-a-command",
        "import os\nclass R:\n    def __reduce__(self):\n"
        "        return (os.system, ('echo pwned',))\ndef f(a):\n    return R()\n",
        "    assert candidate(1) == 1\n",
        error="not plain data",
    ),
    # -- forged replies (written straight to the tests' side) -----------------------------
    Smuggle(
        "forged-class-that-is-a-function",
        forge({"t": "type", "v": "eval"}),
        "    assert candidate(1) == 1\n",
        error="malformed",
    ),
    Smuggle(
        "forged-instance-of-an-untrusted-class",
        forge({"t": "obj", "c": "Yes", "v": []}),
        "    assert candidate(1) == 1\n",
        error="no trusted class",
    ),
    Smuggle(
        "forged-state-hiding-eq",
        forge({"t": "obj", "c": "Node", "v": [["__eq__", {"t": "type", "v": "object"}]]}),
        "    assert candidate([1]) == Node(1)\n",
        setup=NODE,
        error="not an attribute name",
    ),
    Smuggle(
        "forged-state-hiding-a-method-with-a-class",
        forge(
            {
                "t": "obj",
                "c": "Node",
                "v": [["data", {"t": "int", "v": "0"}], ["total", {"t": "type", "v": "int"}]],
            }
        ),
        "    assert candidate([1, 2]).total() == 3\n",
        setup=NODE,
        error="would hide",
    ),
    Smuggle(
        "forged-namedtuple-with-code-in-a-field-name",
        forge({"t": "namedtuple", "n": "P", "f": ["x=__import__('os')"], "v": [{"t": "v"}]}),
        "    assert candidate(1) == (1,)\n",
        error="valid identifiers",
    ),
    Smuggle(
        "forged-defaultdict-factory-that-is-not-a-class",
        forge({"t": "defaultdict", "f": {"t": "v", "v": "os.system"}, "v": []}),
        "    assert candidate(1)['x'] == 1\n",
        error="factory",
    ),
    Smuggle(
        "forged-enum-member-that-does-not-exist",
        forge({"t": "enum", "c": "Color", "v": "__class__"}),
        "    assert candidate(1) is Color.RED\n",
        setup="import enum\nclass Color(enum.Enum):\n    RED = 1\n",
        error="no member",
    ),
    # -- recursion and size bombs ------------------------------------------------------------
    Smuggle(
        "self-containing-list",
        "def f(n):\n    a = []\n    a.append(a)\n    return a\n",
        "    assert candidate(1) == [[]]\n",
        error="deeper",
    ),
    Smuggle(
        "deeply-nested-counter",
        "from collections import Counter\n"
        "def f(n):\n    v = Counter()\n    for _ in range(10_000):\n        v = Counter({'k': v})\n"
        "    return v\n",
        "    assert candidate(1) == {'k': 1}\n",
        error="deeper",
    ),
    Smuggle(
        "size-bomb-counter",
        "from collections import Counter\ndef f(n):\n    return Counter(range(1_100_000))\n",
        "    assert candidate(1) == {0: 1}\n",
        error="parts",
    ),
    Smuggle(
        "forged-deeply-nested-json",
        "import os\ndef f(*args):\n"
        '    nested = b\'{"t": "list", "v": [\' * 5000 + b\']}\' * 5000\n'
        "    os.write(5, b'{\"ok\": ' + nested + b'}\\n')\n"
        "    os._exit(0)\n",
        "    assert candidate(1) == []\n",
        error="RecursionError",
    ),
    Smuggle(
        "forged-namedtuple-shape-bomb",
        forge(
            {
                "t": "list",
                "v": [
                    {"t": "namedtuple", "n": f"T{k}", "f": ["a"], "v": [{"t": "int", "v": "1"}]}
                    for k in range(300)
                ],
            }
        ),
        "    assert candidate(1) == [(1,)] * 300\n",
        error="named-tuple shapes",
    ),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_smuggled_value_never_passes(case):
    assert sandbox_leftovers(wait_s=0) == [], "a sandbox process was running before the case"
    result = run_python_tests(
        case.program,
        f"def check(candidate):\n{case.tests}",
        "f",
        setup=case.setup,
        limits=Limits(wall_timeout_s=5, cpu_s=5, memory_bytes=1024**3),
    )
    assert result.status != R.OK, f"false pass: {result}"
    assert result.tests_passed < result.tests_total
    if case.error:
        first = next(t for t in result.tests if not t.passed)
        assert case.error in first.error, (first.error, result.detail)
    assert sandbox_leftovers() == [], "processes outlived the execution"


def test_codec_refuses_a_subclass_of_every_carried_type():
    """Exact types: a subclass of each carried standard-library type is refused, even one
    that changes nothing."""
    codec = Codec()
    for base, args in [
        (collections.Counter, ()),
        (collections.OrderedDict, ()),
        (collections.defaultdict, ()),
        (collections.deque, ()),
        (decimal.Decimal, (1,)),
        (fractions.Fraction, (1,)),
        (complex, (1,)),
        (datetime.date, (2000, 1, 1)),
        (datetime.datetime, (2000, 1, 1)),
        (datetime.time, ()),
        (datetime.timedelta, ()),
        (frozenset, ()),
        (bytes, ()),
        (bytearray, ()),
        (int, ()),
        (str, ()),
        (tuple, ()),
    ]:
        sub = type("Sub", (base,), {})
        with pytest.raises(NotPlainData):
            codec.encode(sub(*args))


def test_a_trusted_name_is_not_trust():
    """A class of the trusted name that is not the trusted class object is refused on
    encoding, and an instance named so is rebuilt only with the receiver's own class."""
    trusted_ns = {"__name__": "__main__"}
    exec(NODE, trusted_ns)
    codec = Codec(trusted_classes(trusted_ns))
    impostor_ns = {"__name__": "__main__"}
    exec(f"class Node:\n{YES}", impostor_ns)
    with pytest.raises(NotPlainData):
        codec.encode(impostor_ns["Node"]())
    with pytest.raises(NotPlainData):
        codec.encode(impostor_ns["Node"])
    state = [["data", {"t": "int", "v": "1"}], ["next", {"t": "v", "v": None}]]
    rebuilt = codec.decode({"t": "obj", "c": "Node", "v": state})
    assert type(rebuilt) is trusted_ns["Node"] and rebuilt != trusted_ns["Node"](2)
    with pytest.raises(ValueError, match="no trusted class"):
        Codec().decode({"t": "obj", "c": "Node", "v": []})
