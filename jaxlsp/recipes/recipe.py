"""``jaxlsp.toml`` files: find the nearest one, load and check it whole, pick a profile.

:func:`load_recipe` checks every key of every profile (limits and 64-bit dtypes included) and
raises one :class:`RecipeError` listing every problem with its line; a profile that only lacks
dimension sizes loads fine and resolves to :class:`NeedsInput`.
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxlsp.recipes import bounds, schema
from jaxlsp.recipes.locate import line_of, locate, problem_at
from jaxlsp.recipes.problems import KeyPath, Problem, RecipeError, format_key_path
from jaxlsp.recipes.profile import check_profile, names_method, split_target, target_path
from jaxlsp.recipes.propose import propose, propose_target
from jaxlsp.recipes.schema import show
from jaxlsp.recipes.selection import NeedsInput, Resolved, Selected
from jaxlsp.textfiles import Unreadable, read_text

if TYPE_CHECKING:
    from jaxlsp.discovery.entrypoints import Entrypoint

_TOML_LINE = re.compile(r"at line (\d+)")


@dataclass(frozen=True, slots=True)
class Recipe:
    """A checked ``jaxlsp.toml``: its profiles' tables and what each resolves to."""

    path: Path
    text: str
    tables: dict[str, dict[str, Any]]  # profile name -> TOML-form table
    results: dict[str, Selected]  # profile name -> Resolved | NeedsInput
    lines: dict[KeyPath, int]  # key path -> 1-based line
    # profile name -> its problems, kept by a lenient parse (parse_recipe(strict=False)): they are
    # raised when that profile is chosen, and never stop the file's other profiles.
    problems: dict[str, list[Problem]] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent

    def line(self, key_path: KeyPath) -> int | None:
        return line_of(self.lines, key_path)

    def targets(self) -> dict[str, tuple[Path, str]]:
        """Profile name -> (absolute target path, target name)."""
        out: dict[str, tuple[Path, str]] = {}
        for name in self.tables:
            result = self.results.get(name)  # None: a profile with problems (a lenient parse)
            if isinstance(result, Resolved):
                out[name] = (Path(result.target["path"]), result.target["name"])
            else:
                parts = split_target(str(self.tables[name].get("target", "")))
                if parts is not None:
                    out[name] = (target_path(self.folder, parts[0]), parts[1])
        return out


def parse_recipe(text: str, path: Path, *, strict: bool = True) -> Recipe:
    """Check the text of a ``jaxlsp.toml`` at ``path`` (targets are relative to its folder).

    ``strict``: any problem anywhere raises (checking a file, saving into it). Otherwise only the
    file's own problems (TOML, ``version``, top-level keys) raise, and each profile's problems are
    kept in :attr:`Recipe.problems`, raised when that profile is chosen: one broken profile does
    not refuse the others (tracing)."""
    bounds.check_text(text, path)  # a 20,000-part dotted key: before tomllib spends seconds on it
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_LINE.search(str(exc))
        line = int(match.group(1)) if match else None
        raise RecipeError([Problem(path, line, "", f"not valid TOML: {exc}")]) from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise RecipeError([Problem(path, _deepest_line(text), "", _TOO_DEEP)]) from None
    except ValueError:  # an integer of over 4,300 digits: Python 3.11 will not convert it
        line = bounds.long_integer_line(text)
        keys = [k for k, at in locate(text).items() if at == line] if line is not None else []
        key = format_key_path(keys[-1]) if keys else ""
        raise RecipeError([Problem(path, line, key, bounds.too_long())]) from None
    if _depth(data) > MAX_NESTING:  # the checks below walk values recursively
        raise RecipeError([Problem(path, _deepest_line(text), "", _TOO_DEEP)])
    lines = locate(text)
    # Before any check quotes a value: str() of a 4,300-digit integer is slow, of more it raises.
    wide = [(key_path, bounds.too_wide(bits)) for key_path, bits in bounds.wide_integers(data)]
    if wide:
        raise RecipeError(_problems(path, lines, wide))
    found: list[tuple[KeyPath, str]] = []
    for key in data:
        if key not in schema.TOP_KEYS:
            found.append(((key,), schema.suggest(key, schema.TOP_KEYS)))
    if "version" not in data:
        found.append((("version",), f"missing (write version = {schema.VERSION} at the top)"))
    elif data["version"] != schema.VERSION or isinstance(data["version"], bool):
        found.append((("version",), f"expected {schema.VERSION}, got {show(data['version'])}"))
    profiles = data.get("profiles", {})
    tables: dict[str, dict[str, Any]] = {}
    results: dict[str, Selected] = {}
    kept: dict[str, list[tuple[KeyPath, str]]] = {}
    if not isinstance(profiles, dict):
        found.append((("profiles",), f"expected [profiles.NAME] tables, got {show(profiles)}"))
        profiles = {}
    for name, table in profiles.items():
        checked = check_profile(name, table, path.parent)
        if strict or not isinstance(table, dict):
            found += checked.problems
        elif checked.problems:
            kept[name] = list(checked.problems)
        if not isinstance(table, dict):
            continue
        tables[name] = table
        if checked.profile is not None and checked.target is not None:
            results[name] = Resolved(name, checked.profile, checked.target, checked.python, table, path)
        elif checked.missing and not checked.problems:
            results[name] = NeedsInput(name, checked.missing, copy.deepcopy(table), path.parent, path)
    if found:
        raise RecipeError(_problems(path, lines, found))
    return Recipe(path, text, tables, results, lines, {name: _problems(path, lines, p) for name, p in kept.items()})


def _problems(path: Path, lines: dict[KeyPath, int], found: list[tuple[KeyPath, str]]) -> list[Problem]:
    problems = [problem_at(path, lines, key_path, message) for key_path, message in found]
    problems = [p if p.line is not None else replace(p, line=1) for p in problems]  # a missing top-level key
    problems.sort(key=lambda p: p.line or 0)
    return problems


# The server checks a recipe on its event loop before trust (choosing an interpreter) and at every
# trace: about 6 ms a KiB of profiles (tomllib, key lines, checks), so a 1 MiB one held every
# request 2.5 s. 128 KiB holds hundreds of profiles and is checked in well under half a second.
MAX_RECIPE_BYTES = 128 * 1024
MAX_NESTING = 32  # arrays and tables inside one another (input pytrees need a handful)
_TOO_DEEP = f"not accepted: arrays or tables nest more than {MAX_NESTING} deep"


def _depth(value: Any) -> int:
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if level > MAX_NESTING:
                break
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _deepest_line(text: str) -> int:
    """The 1-based line where brackets first nest deepest (a rough count that ignores strings)."""
    level = best = 0
    line = best_line = 1
    for char in text:
        if char in "[{":
            level += 1
            if level > best:
                best, best_line = level, line
        elif char in "]}":
            level = max(level - 1, 0)
        elif char == "\n":
            line += 1
    return best_line


def load_recipe(path: str | os.PathLike[str], *, strict: bool = True) -> Recipe:
    """Read and check a ``jaxlsp.toml``; raises :class:`RecipeError` listing every problem (with
    ``strict = False``, only the file's own: see :func:`parse_recipe`)."""
    recipe_path = Path(path)
    text = read_text(recipe_path, MAX_RECIPE_BYTES)
    if isinstance(text, Unreadable):
        raise RecipeError([Problem(recipe_path, None, "", f"cannot read the recipe: {text}")])
    return parse_recipe(text, recipe_path, strict=strict)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def find_recipe(target_file: str | os.PathLike[str], workspace_root: str | os.PathLike[str]) -> Path | None:
    """The nearest ``jaxlsp.toml`` at or above the target's folder, never above the workspace root
    (None when the target lies outside the root, or none is found)."""
    root = Path(os.path.abspath(workspace_root))
    start = Path(os.path.abspath(target_file))
    folder = start if start.is_dir() else start.parent
    if not _inside(folder, root):
        return None
    while True:
        candidate = folder / schema.RECIPE_FILE
        if candidate.is_file():
            return candidate
        if folder == root or folder.parent == folder:
            return None
        folder = folder.parent


def select_profile(
    recipe: Recipe | None,
    target_path: str | os.PathLike[str] | None,
    name: str | None,
    profile_name: str | None = None,
    *,
    entrypoint: Entrypoint | None = None,
    workspace_root: str | os.PathLike[str] | None = None,
) -> Selected:
    """The profile for a target (file + qualified name).

    By ``profile_name`` when given (it must target that file and name, when those are given);
    else the only profile whose target is that file and name (or a method of that class);
    several: :class:`RecipeError` listing them; none: a proposal made by
    :func:`jaxlsp.recipes.propose.propose` from ``entrypoint`` (or from nothing but the target),
    to be saved next to the recipe (or at ``workspace_root``, or beside the file).
    """
    wanted = Path(os.path.abspath(target_path)) if target_path is not None else None
    if profile_name is not None:
        return _by_name(recipe, wanted, name, profile_name)
    if recipe is not None and wanted is not None and name is not None:
        targets = recipe.targets()
        exact = [p for p, (path, target) in targets.items() if _same(path, wanted) and target == name]
        if not exact:
            exact = [
                p
                for p, (path, target) in targets.items()
                if _same(path, wanted) and target.startswith(name + ".") and names_method(target)
            ]
        if len(exact) == 1:
            return _checked_result(recipe, exact[0])
        if len(exact) > 1:
            listed = ", ".join(f"{p} (line {recipe.line(('profiles', p))})" for p in exact)
            raise RecipeError(
                [
                    Problem(
                        recipe.path,
                        recipe.line(("profiles", exact[1])),
                        "profiles",
                        f"several profiles target {name}: {listed}; choose one by its name",
                    )
                ]
            )
    if wanted is None or name is None:
        raise RecipeError([Problem(None, None, "", "no profile given and no target to propose one for")])
    base = recipe.folder if recipe is not None else Path(workspace_root) if workspace_root else wanted.parent
    taken = set(recipe.tables) if recipe is not None else set()
    if entrypoint is not None:
        return propose(entrypoint, base=base, taken=taken)
    return propose_target(wanted, name, base=base, taken=taken)


def _same(a: Path, b: Path) -> bool:
    if a == b:
        return True
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def _by_name(recipe: Recipe | None, wanted: Path | None, name: str | None, profile_name: str) -> Selected:
    if recipe is None:
        raise RecipeError([Problem(None, None, "", f"no jaxlsp.toml found to hold a profile {profile_name}")])
    if profile_name not in recipe.tables:
        known = ", ".join(recipe.tables) or "none"
        raise RecipeError([Problem(recipe.path, None, "profiles", f"no profile {profile_name} (profiles: {known})")])
    found = recipe.targets().get(profile_name)
    key = ("profiles", profile_name, "target")
    if found is not None and wanted is not None and name is not None:
        path, target = found
        if not _same(path, wanted) or (target != name and not target.startswith(name + ".")):
            raise RecipeError(
                [
                    Problem(
                        recipe.path,
                        recipe.line(key),
                        format_key_path(key),
                        f"profile {profile_name} targets {target} in {path}, not {name} in {wanted}",
                    )
                ]
            )
    return _checked_result(recipe, profile_name)


def _checked_result(recipe: Recipe, profile_name: str) -> Selected:
    problems = recipe.problems.get(profile_name)
    if problems:
        raise RecipeError(problems)
    result = recipe.results[profile_name]
    if isinstance(result, Resolved) and not Path(result.target["path"]).is_file():
        key = ("profiles", profile_name, "target")
        raise RecipeError(
            [Problem(recipe.path, recipe.line(key), format_key_path(key), f"no such file: {result.target['path']}")]
        )
    return result
