"""The folders pytest puts on ``sys.path`` from its configuration, read statically.

pytest reads its settings from the first of ``pytest.ini`` (``[pytest]``), ``pyproject.toml``
(``[tool.pytest.ini_options]``), ``tox.ini`` (``[pytest]``) and ``setup.cfg`` (``[tool:pytest]``)
in the root that has them; its ``pythonpath`` option names folders, relative to that file, that
it inserts into ``sys.path`` before collecting, so a test's ``from pkg import models`` may find
``lib/pkg/models.py``. Discovery resolves imports with them as Python would under pytest. Nothing
runs; a file that does not parse counts as having no such setting.
"""

from __future__ import annotations

import configparser
import tomllib
from pathlib import Path

_INI = (("pytest.ini", "pytest"), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"))


def pythonpath(root: Path) -> list[Path]:
    """The folders of ``pythonpath`` in the pytest configuration of ``root``, in order."""
    for name, section in (_INI[0], ("pyproject.toml", ""), *_INI[1:]):
        path = root / name
        if not path.is_file():
            continue
        found = _toml(path) if name == "pyproject.toml" else _ini(path, section)
        if found is None:
            continue  # no pytest section here: pytest looks at the next file
        return [(root / entry).resolve() for entry in found if entry]
    return []


def _toml(path: Path) -> list[str] | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    options = data.get("tool", {}).get("pytest", {}).get("ini_options")
    if not isinstance(options, dict):
        return None
    value = options.get("pythonpath", [])
    if isinstance(value, str):
        return value.split()
    return [str(v) for v in value] if isinstance(value, list) else []


def _ini(path: Path, section: str) -> list[str] | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    if not parser.has_section(section):
        return None
    return parser.get(section, "pythonpath", fallback="").split()
