"""Mutants of reference solutions (tasks_library/validation/mutants.py): one fault each, only in the
completion, never in strings or comments, spread over the operators, deterministic."""

import ast
import gzip
import json
import shutil
import subprocess

import pytest

from tasks_library.importers.humaneval_js import default_path as js_default_path
from tasks_library.validation.mutants import (
    OPERATORS,
    javascript_mutants,
    javascript_tokens,
    python_mutants,
)

PY_PROMPT = '''def helper(a, b):
    return a > b and a + 1 < 10


def count_big(xs, n):
    """Count the items > n (a docstring with x < y, a + b, not c and "quotes").
    >>> count_big([1, 5], 2)
    1
    """
'''
PY_COMPLETION = """    total = 0
    flag = True
    label = "big"
    for i in range(0, len(xs)):
        if xs[i] > n and not xs[i] in (label,):
            total += 1
        elif xs[i] * 2 == n or flag:
            total = total - 1
    if xs[1:n] is None:
        return 0
    return total
"""


def python_function(program: str, name: str) -> ast.FunctionDef:
    return next(
        n for n in ast.parse(program).body if isinstance(n, ast.FunctionDef) and n.name == name
    )


def test_python_every_mutant_parses_and_differs_from_the_original_in_exactly_one_line():
    original = ast.unparse(ast.parse(PY_PROMPT + PY_COMPLETION)).splitlines()
    mutants = python_mutants(PY_PROMPT, PY_COMPLETION, limit=1000)
    assert mutants
    for mutant in mutants:
        lines = ast.unparse(ast.parse(mutant.program)).splitlines()
        assert len(lines) == len(original), mutant
        changed = [k for k, (a, b) in enumerate(zip(original, lines)) if a != b]
        assert len(changed) == 1, (mutant.description, changed)
    assert len({m.program for m in mutants}) == len(mutants)
    assert len({m.id for m in mutants}) == len(mutants)


def test_python_the_prompt_its_docstring_and_its_helpers_are_never_mutated():
    docstring = ast.get_docstring(python_function(PY_PROMPT + PY_COMPLETION, "count_big"))
    helper = ast.unparse(python_function(PY_PROMPT + PY_COMPLETION, "helper"))
    completion_lines = PY_COMPLETION.splitlines()
    for mutant in python_mutants(PY_PROMPT, PY_COMPLETION, limit=1000):
        assert ast.get_docstring(python_function(mutant.program, "count_big")) == docstring
        assert ast.unparse(python_function(mutant.program, "helper")) == helper
        assert 1 <= mutant.line <= len(completion_lines)
        assert mutant.description.startswith(f"line {mutant.line}: ")
        assert mutant.id.endswith(f":{mutant.operator}:line {mutant.line}")
        swaps_and_or = mutant.description.endswith(("`and` -> `or`", "`or` -> `and`"))
        if mutant.operator in ("compare", "arithmetic") or swaps_and_or:
            before = mutant.description.split("`")[1]
            assert before in completion_lines[mutant.line - 1], mutant.description


def test_python_each_operator_class_appears_with_the_expected_rewrites():
    mutants = python_mutants(PY_PROMPT, PY_COMPLETION, limit=1000)
    assert {m.operator for m in mutants} == set(OPERATORS)
    bodies = {m.operator: set() for m in mutants}
    for mutant in mutants:
        bodies[mutant.operator].add(ast.unparse(python_function(mutant.program, "count_big")))

    def some(operator, fragment):
        return any(fragment in body for body in bodies[operator])

    assert some("boundary", "range(0, len(xs) + 1)") and some("boundary", "range(0, len(xs) - 1)")
    assert some("boundary", "xs[2:n]") and some("boundary", "xs[1:n - 1]")
    assert some("compare", "xs[i] >= n") and some("compare", "xs[i] not in (label,)")
    assert some("compare", "xs[1:n] is not None") and some("compare", "xs[i] * 2 != n")
    assert (
        some("arithmetic", "total -= 1")
        and some("arithmetic", "xs[i] / 2")
        and some("arithmetic", "total + 1")
    )
    assert (
        some("constant", "flag = False")
        and some("constant", "label = ''")
        and some("constant", "total = 1")
    )
    assert some("return", "return None")
    assert some("boolean", "xs[i] > n or not xs[i]") and some(
        "boolean", "if xs[i] > n and xs[i] in (label,)"
    )
    assert some("boolean", "xs[i] * 2 == n and flag")


def test_python_a_prompt_ending_mid_line_keeps_its_part_of_the_line():
    prompt = "def f(x):\n    y = x + 1\n    return y *"
    completion = " 2\n"
    mutants = python_mutants(prompt, completion)
    assert mutants  # the literal 2 starts in the completion
    for mutant in mutants:
        body = python_function(mutant.program, "f").body
        assert ast.unparse(body[0]) == "y = x + 1"
        assert ast.unparse(body[1]).startswith("return y * ")  # the `*` began in the prompt
        assert mutant.line == 1


def test_python_limit_is_respected_and_spread_over_operators_and_lines():
    # Many constants late in the body, a few of every other kind: a first-come cut would be all
    # constants.
    completion = "".join(f"    c{k} = {k + 10}\n" for k in range(30)) + PY_COMPLETION
    full = python_mutants(PY_PROMPT, completion, limit=10_000)
    limited = python_mutants(PY_PROMPT, completion, limit=12)
    assert len(limited) == 12
    assert {m.operator for m in limited} == set(OPERATORS)
    per_operator = {op: sum(m.operator == op for m in limited) for op in OPERATORS}
    assert max(per_operator.values()) - min(per_operator.values()) <= 1
    # kept mutants are a subset of the full list, with the same ids (ids do not depend on limit)
    assert set(limited) <= set(full)
    constants = sorted(m.line for m in limited if m.operator == "constant")
    all_constant_lines = sorted(m.line for m in full if m.operator == "constant")
    assert (
        constants[-1] >= all_constant_lines[len(all_constant_lines) // 2]
    )  # not just the first lines
    assert python_mutants(PY_PROMPT, completion, limit=0) == []
    with pytest.raises(ValueError):
        python_mutants(PY_PROMPT, completion, limit=-1)


def test_python_mutants_are_deterministic():
    assert python_mutants(PY_PROMPT, PY_COMPLETION) == python_mutants(PY_PROMPT, PY_COMPLETION)


def test_python_a_program_that_does_not_parse_raises_syntax_error():
    with pytest.raises(SyntaxError):
        python_mutants("def f(x):\n", "    return (x +\n")


def test_python_skips_what_cannot_be_a_fault():
    prompt = "def f(x):\n"
    completion = '    "a bare string"\n    print(f"{x} items", x)\n    y = x + 1\n    return None\n'
    mutants = python_mutants(prompt, completion, limit=100)
    assert {m.operator for m in mutants} == {
        "arithmetic",
        "constant",
    }  # `x + 1` only; `return None` is None already
    for mutant in mutants:
        assert "a bare string" in mutant.program and "items" in mutant.program


def test_python_every_humaneval_reference_has_valid_mutants_in_its_completion(humaneval):
    for row in humaneval:
        prompt, completion = row["prompt"], row["canonical_solution"]
        original = ast.unparse(ast.parse(prompt + completion))
        mutants = python_mutants(prompt, completion)
        assert 1 <= len(mutants) <= 40, row["task_id"]
        for mutant in mutants:
            assert mutant.program != original
            ast.parse(mutant.program)
            assert 1 <= mutant.line <= completion.count("\n") + 1, (row["task_id"], mutant)


# --------------------------------------------------------------------------- JavaScript

JS_PROMPT = """/* Count items x > n, e.g. a < b && c || d; return x + 1.
  >>> countBig([1, 5], 2)
  1
  */
const helper = (a, b) => a < b && a + 1 > 0;
const countBig = (xs, n) => {
"""
JS_COMPLETION = r"""  let total = 0;  // a < b + c
  const re = /a+b<c/g;  /* x > y - 1 */
  const s = "a<b" + 'x+y' + `t ${xs.length < n ? "<" : '>'} ${1 + 2}`;
  for (let i = 0; i < xs.length; i++) {
    if (xs[i] > n && !re.test(s) || xs[i] === -1) {
      total += 1;
      total = total - 1 * 2 / 4;
    }
  }
  const k = (x) => x ** 2;
  if (total >= 3) return -total;
  return total === 0 ? true : false;
}
"""
PROTECTED = [
    '"a<b"',
    "'x+y'",
    "`t ${xs.length < n ? \"<\" : '>'} ${1 + 2}`",
    "// a < b + c",
    "/* x > y - 1 */",
    "/a+b<c/g",
]


def js_rows() -> list[dict]:
    with gzip.open(js_default_path(), "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_javascript_tokenizer_tells_code_from_strings_comments_templates_and_regexes():
    tokens = javascript_tokens(JS_COMPLETION)
    kinds = {t.text: t.kind for t in tokens}
    assert kinds['"a<b"'] == kinds["'x+y'"] == "string"
    assert kinds["`t ${xs.length < n ? \"<\" : '>'} ${1 + 2}`"] == "template"
    assert kinds["// a < b + c"] == kinds["/* x > y - 1 */"] == "comment"
    assert kinds["/a+b<c/g"] == "regex"
    assert {"++", "+=", "=>", "**", ">=", "==="} <= {t.text for t in tokens if t.kind == "punct"}
    assert [t.text for t in javascript_tokens("a / b / c")] == [
        "a",
        "/",
        "b",
        "/",
        "c",
    ]  # divisions, not a regex


def test_javascript_strings_comments_regexes_and_the_prompt_are_never_mutated():
    original = JS_PROMPT + JS_COMPLETION
    literal_kinds = ("string", "template", "comment", "regex")
    literals = [(t.kind, t.text) for t in javascript_tokens(original) if t.kind in literal_kinds]
    mutants = javascript_mutants(JS_PROMPT, JS_COMPLETION, limit=1000)
    assert mutants
    for mutant in mutants:
        assert mutant.program.startswith(JS_PROMPT)
        assert mutant.program != original
        for text in PROTECTED:
            assert text in mutant.program, (mutant.description, text)
        assert [
            (t.kind, t.text) for t in javascript_tokens(mutant.program) if t.kind in literal_kinds
        ] == literals
        # compound tokens are other operators, left alone
        for compound in ("++", "+=", "=>", "**"):
            assert mutant.program.count(compound) == original.count(compound), (
                mutant.description,
                compound,
            )
        assert 1 <= mutant.line <= JS_COMPLETION.count("\n")


def test_javascript_one_token_changes_in_the_right_place():
    original = JS_PROMPT + JS_COMPLETION
    completion_lines = JS_COMPLETION.splitlines()
    for mutant in javascript_mutants(JS_PROMPT, JS_COMPLETION, limit=1000):
        old, new = original.splitlines(), mutant.program.splitlines()
        changed = [k for k, (a, b) in enumerate(zip(old, new)) if a != b]
        assert len(old) == len(new) and len(changed) == 1, mutant.description
        assert changed[0] - JS_PROMPT.count("\n") + 1 == mutant.line, mutant.description
        if mutant.operator != "return":
            before = mutant.description.split("`")[1]
            assert before in completion_lines[mutant.line - 1]


def test_javascript_each_operator_class_appears_and_unary_operators_are_not_arithmetic():
    mutants = javascript_mutants(JS_PROMPT, JS_COMPLETION, limit=1000)
    assert {m.operator for m in mutants} == {
        "arithmetic",
        "compare",
        "constant",
        "return",
        "boolean",
    }

    def some(operator, fragment):
        return any(
            fragment in m.program[len(JS_PROMPT) :] for m in mutants if m.operator == operator
        )

    assert (
        not some("compare", "i <= xs.length")
        and some("compare", "total > 3")
        and some("compare", "xs[i] !== -1")
    )
    assert (
        some("arithmetic", "total + 1 * 2")
        and some("arithmetic", "1 / 2 / 4")
        and some("arithmetic", "1 * 2 * 4")
    )
    assert some("boolean", "xs[i] > n || !re") and some("boolean", "&& re.test(s)")
    assert some("constant", "let total = 1;") and some("constant", "? false : false")
    assert some("return", "return undefined;\n}") and some("return", "return undefined;\n  return")
    # `-total` and `-1` are negations: a `-` with no operand before it is never turned into `+`
    for mutant in mutants:
        body = mutant.program[len(JS_PROMPT) :]
        assert "return +total" not in body and "=== +1" not in body


def test_javascript_substitutions_that_would_fuse_tokens_are_dropped():
    prompt = "const f = (a, b) => {\n"
    completion = "  return a-+b;\n}\n"
    for mutant in javascript_mutants(prompt, completion, limit=100):
        assert "a++b" not in mutant.program


def test_javascript_return_spans_multi_line_expressions_and_stops_at_asi():
    prompt = "const f = (xs) => {\n"
    completion = "  if (!xs) return\n  return xs\n    .map(x => x)\n    .length\n}\n"
    returns = [
        m for m in javascript_mutants(prompt, completion, limit=100) if m.operator == "return"
    ]
    assert [m.program[len(prompt) :] for m in returns] == [
        "  if (!xs) return\n  return undefined\n}\n"
    ]


def test_javascript_limit_and_determinism():
    full = javascript_mutants(JS_PROMPT, JS_COMPLETION, limit=1000)
    limited = javascript_mutants(JS_PROMPT, JS_COMPLETION, limit=7)
    assert len(limited) == 7 and set(limited) <= set(full)
    assert len({m.operator for m in limited}) == 5  # all five operator classes share the budget
    assert javascript_mutants(JS_PROMPT, JS_COMPLETION) == javascript_mutants(
        JS_PROMPT, JS_COMPLETION
    )
    with pytest.raises(ValueError):
        javascript_mutants(JS_PROMPT, JS_COMPLETION, limit=-1)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to compile the mutants")
def test_javascript_every_humaneval_x_mutant_compiles():
    programs = [JS_PROMPT + JS_COMPLETION]
    programs += [m.program for m in javascript_mutants(JS_PROMPT, JS_COMPLETION, limit=1000)]
    for row in js_rows():
        mutants = javascript_mutants(row["prompt"], row["canonical_solution"])
        assert 1 <= len(mutants) <= 40, row["task_id"]
        programs += [m.program for m in mutants]
    script = (
        "const vm = require('vm'); const bad = [];"
        "JSON.parse(require('fs').readFileSync(0, 'utf8')).forEach((src, k) => {"
        "  try { new vm.Script(src); } catch (e) { bad.push([k, String(e)]); } });"
        "console.log(JSON.stringify(bad));"
    )
    result = subprocess.run(
        ["node", "-e", script],
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    bad = json.loads(result.stdout)
    assert bad == [], [(programs[k][-300:], error) for k, error in bad[:3]]


def test_javascript_length_loop_bounds_are_not_mutated():
    prompt = "const f = (xs) => {\n"
    completion = (
        "  let n = 0\n  for (let i = 0; i < xs.length; i++) {\n    if (xs[i] < 3) { n++ }\n  }\n"
        "  return n\n}\n"
    )
    compares = [
        m for m in javascript_mutants(prompt, completion, limit=100) if m.operator == "compare"
    ]
    assert [m.line for m in compares] == [
        3
    ]  # `xs[i] < 3` only; `i < xs.length` reads undefined at worst
    assert "xs[i] <= 3" in compares[0].program and "i < xs.length" in compares[0].program
