"""Which runnable examples reach a definition, read from names alone (no values worked out).

A target used inside another definition (``Block(...)`` in ``ResNet``, ``loss_fn`` in
``train_step``) or passed to one is reached when that definition runs: :class:`Reach` follows
such uses up to :data:`MAX_PARENT_DEPTH` definitions, through files that import the target's
package (a file of the same folder defining its own ``Linear`` is not one), and returns the tests,
scripts and modules that run them. Only the code's names are looked at (tokens, not strings or
comments), so it is cheap; whether an example really reaches the target, a run shows.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from jaxlsp.discovery.callsites.namespaces import SourceFile
from jaxlsp.discovery.callsites.sites import (
    SCRIPT_FOLDERS,
    CallSite,
    SiteKind,
    SiteTarget,
    dedupe,
    is_test_file,
    relative,
)
from jaxlsp.discovery.index import WorkspaceIndex

Elsewhere = Callable[[SourceFile, str, set[str], Path, str], bool]
MAX_PARENT_DEPTH = 4  # ResNetBlock <- ResNet <- create_model <- train_and_evaluate <- a test
_HEADER = re.compile(r"\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")


class Reach:
    """Examples that reach definitions of the workspace under ``root`` (memoized per search)."""

    def __init__(self, index: WorkspaceIndex, root: Path, elsewhere: Elsewhere | None = None) -> None:
        self.index = index
        self.root = root
        # whether a statement's uses of a name all resolve to another definition than the one
        # searched (``modeling.forward`` of another ``modeling`` module): the finder's resolver
        self.elsewhere = elsewhere
        # keyed by depth too: a result cut short by MAX_PARENT_DEPTH must not stand in for the
        # same definition met nearer the target (``train_and_evaluate`` through ``train_step``
        # at depth 4 finds nothing; through ``model`` at depth 3 it finds ``main.py``)
        self.memo: dict[tuple[Path, str, int], list[CallSite]] = {}

    def example_of(self, file: SourceFile, owner: str, top_level: bool) -> tuple[SiteKind, str | None]:
        """The kind of example a scope belongs to, and the example to run to reach it."""
        rel = relative(file.path, self.root)
        if is_test_file(file.path):
            if file.path.name == "conftest.py":
                return "test", relative(file.path.parent, self.root)
            parts = owner.split(".") if owner else []
            if parts and parts[-1].startswith("test") and len(parts) <= 2:
                return "test", rel + "::" + "::".join(parts)
            return "test", rel
        folders = file.path.relative_to(self.root).parts[:-1] if file.path.is_relative_to(self.root) else ()
        if file.main_guard or any(p in SCRIPT_FOLDERS for p in folders):
            return "script", rel
        return "module", rel if top_level else None

    def reached(
        self, path: Path, name: str, depth: int, files: list[SourceFile], seen: set[tuple[Path, str]]
    ) -> list[CallSite]:
        """The runnable examples that use ``name`` (defined in ``path``), directly or through
        definitions that use it, up to :data:`MAX_PARENT_DEPTH`: read from the code's names alone
        (no values are worked out: a run will show whether the example really reaches it)."""
        key = (path, name, depth)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = []
        seen = seen | {(path, name)}
        words = {name}
        aliases: set[tuple[Path, int]] = set()
        for file in files:  # top-level aliases: ResNet18 = partial(ResNet, ...), Model = ResNet
            if name in file.words and not is_test_file(file.path):
                for alias, indexes in file.assigned().items():
                    for i in indexes:
                        if name in file.words_of(i) and alias_of(file.text_of(i), alias, name):
                            words.add(alias)
                            aliases.add((file.path, i))
        out: list[CallSite] = []
        parents: list[tuple[Path, str]] = []
        module = self.index.modules.module_name(path)
        for file in files:
            if not words & file.words or not self.sees(file, path, module):
                continue
            own = file.summary.binding(name) if file.path != path and file.summary is not None else None
            if own is not None and own.how == "local":
                continue  # it defines its own ``loss``: its uses are of that one
            for i, st in enumerate(file.statements):
                if not (words & file.words_of(i)):
                    continue
                text = file.text_of(i)
                if imports_only(text) or not uses_names(text, words):
                    continue
                if self.elsewhere is not None and self.elsewhere(file, text, words, path, name):
                    continue
                defined = header_name(file.lines[st.header]) if file.defines(i) else None
                if (defined is not None and (file.path, defined) in seen) or (file.path, i) in aliases:
                    continue
                if defined is not None and (not is_test_file(file.path) or _test_helper(file, st.header, defined)):
                    # a test file's helper (``_test_resnest_param_count``) runs in the tests that
                    # call it, not in every test of its file
                    parents.append((file.path, defined))
                    continue
                for owner, line in self._test_owners(file, i, defined, words):
                    kind, example = self.example_of(file, owner, defined is None)
                    if kind == "module" and not any(_called(w).search(text) for w in words):
                        continue  # a module's statement that only names it does not run it (a script's may:
                        # app.run(main))
                    if example is not None:
                        out.append(CallSite(file.path, line + 1, kind, example, static=False, via="uses it here"))
        if depth < MAX_PARENT_DEPTH:
            for parent_path, parent in parents:
                for site in self.reached(parent_path, parent, depth + 1, files, seen):
                    out.append(
                        replace(site, via=f"through {parent} ({relative(parent_path, self.root)})", hops=site.hops + 1)
                    )
        out = dedupe(sorted(out, key=CallSite.rank))
        self.memo[key] = out
        return out

    def test_use(self, file: SourceFile, index: int, words: set[str]) -> list[CallSite]:
        """The tests that definition ``index`` of a test file holds, as dynamic sites, when its
        body uses one of ``words`` where calls are not read statically (a module class defined
        inside the test function, as Equinox's and Flax's tests do): running them may reach the
        target."""
        if not is_test_file(file.path):
            return []
        st = file.statements[index]
        defined = header_name(file.lines[st.header])
        out: list[CallSite] = []
        for owner, first in self._test_owners(file, index, defined, words):
            kind, example = self.example_of(file, owner, False)
            if example is None:
                continue
            line = next((n for n in range(first, st.end + 1) if uses_names(file.lines[n], words)), first)
            out.append(CallSite(file.path, line + 1, kind, example, static=False, via="uses it here"))
        return out

    def script_use(self, file: SourceFile, indexes: list[int], words: set[str]) -> CallSite | None:
        """A script whose top-level statements ``indexes`` use one of ``words`` only where calls
        are not read statically (in a function defined inside ``if __name__ == "__main__":``, as
        JAX's own examples do), as a dynamic site: running the script may reach the target."""
        kind, example = self.example_of(file, "", True)
        if kind != "script" or example is None:
            return None
        for i in indexes:
            st = file.statements[i]
            for n in range(st.start, st.end + 1):
                if uses_names(file.lines[n], words):
                    return CallSite(file.path, n + 1, kind, example, static=False, via="uses it here")
        return None

    def sees(self, file: SourceFile, path: Path, module: str) -> bool:
        """Whether ``file`` can name what ``path`` defines: it is that file, or imports its
        module (or something from it); a file of the same folder defining its own ``Linear``
        does not."""
        if file.path == path:
            return True
        fs = file.summary
        if fs is None:
            return True
        top = module.split(".", 1)[0]  # a package may re-export it: anything from the package counts
        if top not in file.words and module.rsplit(".", 1)[-1] not in file.words:
            return False
        for b in (*(b for found in fs.bindings.values() for b in found), *fs.stars):
            if b.how in ("import", "from", "star"):
                absolute = self.index.modules.absolute(file.path, b.target, b.level)
                if absolute == top or absolute.startswith(top + ".") or self.imports_file(file, absolute, path):
                    return True
        return False

    def imports_file(self, file: SourceFile, absolute: str, path: Path) -> bool:
        """Whether the import of ``absolute`` in ``file`` loads ``path`` (the module itself, or
        the package whose ``__init__.py`` lies above it), found on the file system as Python
        would: ``from pkg import models`` loads pkg/models.py though pkg has no
        ``__init__.py`` (a namespace package, whose files' own module names are their stems)."""
        parts = absolute.split(".")
        for i in range(len(parts), 0, -1):
            found = self.index.modules.locate(".".join(parts[:i]), file.path)
            if found is None:
                continue
            return found == path or (found.name == "__init__.py" and path.is_relative_to(found.parent))
        return False

    def _test_owners(self, file: SourceFile, index: int, defined: str | None, words: set[str]) -> list[tuple[str, int]]:
        """The tests that statement ``index`` of a test file holds, each with the 0-based line of
        its first use of a word: ``test_x``, every ``TestX.test_y`` of a class whose body uses a
        word (read from the lines, not parsed: the first such test may only build an instance,
        ``test_props``, and a later one call the method that reaches the target), else the whole
        file."""
        st = file.statements[index]
        if defined is None or not is_test_file(file.path):
            return [("", st.header)]
        if defined.startswith("test"):
            return [(defined, st.header)]
        method: str | None = None
        out: list[tuple[str, int]] = []
        for n in range(st.header + 1, st.end + 1):
            line = file.lines[n]
            found = _HEADER.match(line)
            if found is not None and "class" not in line.split("(")[0]:
                method = found.group(1)
            elif method and method.startswith("test") and uses_names(line, words):
                out.append((f"{defined}.{method}", n))
                method = None  # once per test
        return out or [("", st.header)]

    def importing_tests(self, target: SiteTarget, files: list[SourceFile], sites: list[CallSite]) -> Iterator[CallSite]:
        """Test files that import the target's module, when nothing else reaches the target."""
        if any(s.example for s in sites):
            return
        module = self.index.modules.module_name(target.path)
        stem = module.rsplit(".", 1)[-1]
        for file in files:
            if not is_test_file(file.path) or stem not in file.words:
                continue
            fs = file.summary
            if fs is None:
                continue
            for bindings in fs.bindings.values():
                hit = False
                for b in bindings:
                    if b.how not in ("import", "from"):
                        continue
                    absolute = self.index.modules.absolute(file.path, b.target, b.level)
                    if (
                        absolute == module
                        or absolute.startswith(module + ".")
                        or self.imports_file(file, absolute, target.path)
                    ):
                        hit = True
                        break
                if hit:
                    yield CallSite(
                        file.path, b.line + 1, "test", relative(file.path, self.root), static=False,
                        via=f"imports {module}",
                    )  # fmt: skip
                    break


def _test_helper(file: SourceFile, header: int, name: str) -> bool:
    """Whether ``name``, defined at line index ``header`` of test file ``file``, is a plain helper
    function its tests call: not a test, not a class (``class DecTest(absltest.TestCase)`` is a
    test whatever its name), not a fixture (pytest hands those over by parameter name)."""
    if name.startswith(("test", "Test")) or file.path.name == "conftest.py":
        return False
    if _FUNCTION.match(file.lines[header]) is None:
        return False
    text = "\n".join(file.lines)
    if _TESTS_HERE.search(text) is None:
        # a helper module named like a test (``arch_test_utils.py``) holds no test to follow it
        # to: its users are elsewhere, reached as before
        return False
    fixture = rf"@pytest\.fixture[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+{re.escape(name)}\b"
    return re.search(fixture, text) is None


_FUNCTION = re.compile(r"\s*(?:async\s+)?def\s")
_TESTS_HERE = re.compile(r"^\s*(?:async\s+)?def\s+test|^\s*class\s+(?:Test\w*|\w+\([^)]*TestCase[^)]*\))\s*[(:]", re.M)


@functools.lru_cache(maxsize=4096)
def _word(word: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(word)}\b")


@functools.lru_cache(maxsize=4096)
def _called(word: str) -> re.Pattern[str]:
    return re.compile(rf"\b{re.escape(word)}\s*\(")


def mentions(text: str, words: Iterable[str]) -> bool:
    return any(_word(w).search(text) for w in words)


@functools.lru_cache(maxsize=4096)
def names_in_code(text: str) -> frozenset[str] | None:
    """The names a statement uses as code, not in strings or comments. None when the text does
    not tokenize (then a plain search decides)."""
    try:
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        return frozenset(t.string for t in tokens if t.type == tokenize.NAME)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def uses_names(text: str, words: Iterable[str]) -> bool:
    """Whether the statement ``text`` uses one of ``words`` as a name in its code."""
    names = names_in_code(text)
    return mentions(text, words) if names is None else any(w in names for w in words)


def imports_only(text: str) -> bool:
    return text.lstrip().startswith(("import ", "from "))


def alias_of(text: str, alias: str, name: str) -> bool:
    """Whether the top-level statement ``text`` binds ``alias`` to ``name`` or a partial of it."""
    head = rf"\s*{re.escape(alias)}\s*(?::[^=]*)?=\s*"
    target = rf"(?:\w+\.)*{re.escape(name)}"
    plain = re.match(rf"{head}{target}\s*(?:#.*)?$", text.strip("\n"))
    partial = re.match(rf"{head}(?:functools\.)?partial\(\s*{target}\s*[,)]", text)
    return plain is not None or partial is not None


def header_name(line: str) -> str | None:
    found = _HEADER.match(line)
    return found.group(1) if found else None
