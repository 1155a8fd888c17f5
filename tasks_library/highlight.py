"""A workspace file's text as highlighted lines, for the task page's file view and its API.

Pygments picks the lexer from the file's name (plain text when it knows none) and tokenises the
text; the answer is data, never HTML: one list per line of ``[css class, text]`` pairs, the
class being Pygments' short name of the token type (``k`` keyword, ``s2`` string, ``c1``
comment...; ``""`` for plain text). The page writes each pair as a ``<span>`` whose text is set
as text, so a file holding markup stays text whatever the lexer made of it.
"""

from __future__ import annotations

from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

HIGHLIGHT_MAX_CHARS = 256 * 1024
"""Files longer than this are shown as plain lines (tokenising them costs more than it shows)."""


def _css_class(token_type) -> str:
    """The short class of ``token_type`` or of its nearest parent that has one."""
    while token_type is not None:
        name = STANDARD_TYPES.get(token_type)
        if name is not None:
            return name
        token_type = token_type.parent
    return ""


def highlighted_lines(path: str, text: str) -> list[list[list[str]]]:
    """``text`` (the file at ``path``) as ``[[[css class, text], ...], ...]``, one list per line
    (the newlines themselves left out); adjacent tokens of one class are merged."""
    try:
        lexer = get_lexer_for_filename(path, stripnl=False, stripall=False, ensurenl=False)
    except ClassNotFound:
        lexer = TextLexer(stripnl=False, ensurenl=False)
    if len(text) > HIGHLIGHT_MAX_CHARS:
        lexer = TextLexer(stripnl=False, ensurenl=False)
    lines: list[list[list[str]]] = [[]]
    for token_type, value in lexer.get_tokens(text):
        css = _css_class(token_type)
        for i, part in enumerate(value.split("\n")):
            if i:
                lines.append([])
            if not part:
                continue
            line = lines[-1]
            if line and line[-1][0] == css:
                line[-1][1] += part
            else:
                line.append([css, part])
    if text.endswith("\n") and not lines[-1]:
        lines.pop()  # the file's last newline ends its last line; it starts none
    return lines
