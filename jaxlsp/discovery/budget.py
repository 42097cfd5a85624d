"""What libcst may be given: a linear pre-scan of each statement, before the parser sees it.

libcst's native parser runs in the server's process and holds the GIL. Measured with libcst
1.9 on CPython 3.11: brackets nested 1,500 deep overflow its stack (SIGSEGV, the server dies);
left-recursive chains cost quadratic time (``x+x+...`` 5,000 terms 5 s, ``x[0][0]...`` 1,000
subscripts 0.75 s and 5,000 of them 28 s); plain code parses at about 100 KB/s. CPython itself
refuses more than 200 nested brackets, so nothing a user can run is lost by the bounds below.
Size alone costs too (issue 25): a 450,000-element literal in one statement took 41 s and 1.8 GB,
100,000 decorators on one ``def`` 16 s; libcst spends about 30 µs and 2 KB per token (measured on
``jax/_src/lax/lax.py``), and the parse of one statement cannot be interrupted, so a statement of
more than ``MAX_TOKENS`` tokens is not parsed either (a class statement is parsed piece by piece,
its header and fields each under the bound): the largest statement of the installed jax,
flax and equinox has 6,092 tokens (a test-data table), the largest ``def`` 2,820, and a statement
at the bound parses in about 0.3 s.

A file of more than ``MAX_STATEMENTS`` top-level statements is summarised up to there: 100,000
distinct assignments took 15 s of parsing and left so many live summaries that the garbage
collector's full passes alone held the server up to 1.5 s each.

A statement over a bound is skipped, never parsed: it costs only itself (its definition gets no
lens), the index remembers why, and the server says so in a log line and a diagnostic. The
file-wide budget bounds the time a file full of merely long chains can take.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jaxlsp.textfiles import too_large

MAX_FILE_BYTES = 1024 * 1024  # a larger file is not read (generated code; ~10 s of libcst)
MAX_DEPTH = 100  # nested brackets in one statement
MAX_CHAIN = 500  # operators in one expression chain (between commas at one bracket level)
LONG_CHAIN = 16  # chains longer than this count against the file's budget ...
FILE_BUDGET = 4_000_000  # ... as the sum of their squared lengths (about 3 s of libcst at worst)
MAX_STATEMENTS = 10_000  # top-level statements summarised per file (the largest of jax, flax: 1,325)
MAX_CLASS_NESTING = 20  # classes in classes (CPython itself stops at 100 indentation levels)
MAX_TOKENS = 10_000  # tokens in one statement (names, numbers, strings, operators, brackets)

# Strings (with prefixes, triple-quoted first), comments, brackets, separators, operators and
# operator keywords, and operands (names, numbers). Whitespace and anything else is skipped; a run
# of spaces is taken whole, with the token after it (possessively: never given back), because
# trying every alternative at each space cost 0.5 s on 1,000 nested classes' indentation (issue 25).
_TOKEN = re.compile(
    r"""[ \t\f]*+(?:(?P<s>[rRbBuUfF]{0,2}(?:\"\"\"(?:[^\\]|\\.)*?(?:\"\"\"|\Z)|'''(?:[^\\]|\\.)*?(?:'''|\Z)"""
    r"""|"(?:[^"\\\n]|\\.)*(?:"|$)|'(?:[^'\\\n]|\\.)*(?:'|$)))"""
    r"|(?P<c>#[^\n]*)"
    r"|(?P<o>[(\[{])"
    r"|(?P<e>[)\]}])"
    r"|(?P<p>[,;])"
    r"|(?P<n>\n)"
    r"|(?P<x>\*\*=?|//=?|<<=?|>>=?|[<>!=:]=|->|[-+*/%@&|^~<>=.]|\b(?:not|and|or|if|else|lambda|await|in|is)\b)"
    r"|(?P<w>[A-Za-z_]\w*|\d[\w.]*))",
    re.M | re.S,
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a statement (or a whole file) is not parsed; ``line`` is 0-based (within the statement
    when the scan reports it, within the file in a file's summary)."""

    line: int
    reason: str
    whole_file: bool = False


@dataclass(frozen=True, slots=True)
class Cost:
    """A statement's pre-scan: its refusal, if any, and what it costs the file's budget."""

    refusal: Refusal | None
    units: int


def scan(text: str, max_tokens: int | None = MAX_TOKENS) -> Cost:
    """Bracket depth, operator chains and (unless ``max_tokens`` is None: a class statement,
    parsed piece by piece) tokens of one statement, outside strings and comments."""
    depth = 0
    line = 0
    chains = [0]  # the open chain's length at each bracket level
    operand = False  # the previous token ends an operand: "(" or "[" then is a call or subscript
    units = 0
    tokens = 0
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind != "n" and kind != "c" and max_tokens is not None:
            tokens += 1
            if tokens > max_tokens:  # said at the statement's first line: the size is the statement's
                return Cost(Refusal(0, f"the statement has more than {max_tokens:,} tokens"), 0)
        if kind == "w":
            operand = True
            continue
        if kind == "x":
            chains[-1] += 1
            operand = False
        elif kind == "o":
            if operand:  # f(...) or x[...]: one more link of the enclosing chain
                chains[-1] += 1
                if chains[-1] > MAX_CHAIN:
                    return Cost(Refusal(line, f"an expression chains more than {MAX_CHAIN} operations"), 0)
            depth += 1
            if depth > MAX_DEPTH:
                return Cost(Refusal(line, f"brackets nest more than {MAX_DEPTH} deep"), 0)
            chains.append(0)
            operand = False
            continue
        elif kind == "e":
            units += _close(chains.pop()) if len(chains) > 1 else 0
            depth = max(depth - 1, 0)
            operand = True
            continue
        elif kind == "p" or (kind == "n" and depth == 0):
            units += _close(chains[-1])
            chains[-1] = 0
            operand = False
            line += kind == "n"
        elif kind == "s":
            line += m.group().count("\n")
            operand = True
            continue
        elif kind == "n":
            line += 1
            continue
        else:  # a comment
            continue
        if chains[-1] > MAX_CHAIN:
            return Cost(Refusal(line, f"an expression chains more than {MAX_CHAIN} operations"), 0)
    units += sum(_close(c) for c in chains)
    return Cost(None, units)


def _close(length: int) -> int:
    return length * length if length > LONG_CHAIN else 0


SPENT = "the file's budget for long expressions is spent"
TOO_MANY = f"the file has more than {MAX_STATEMENTS:,} top-level statements: nothing from here on is analysed"
TOO_LARGE = too_large(MAX_FILE_BYTES)
