"""A skipped test is a test that did not run: the suite fails when one is skipped for a reason that
is not on the allow-list ``allowed_skips`` of the test configuration (``pyproject.toml``).

Each entry is ``PREFIX | WHY``: a skip whose reason starts with ``PREFIX`` is allowed, and ``WHY``
says why this suite may leave that test unrun (no TPU on this machine, ...). A file that went
missing, a tool that was not installed or a module that moved is never a reason: those skips fail
the run, with the test and its reason named. Loaded with ``-p tests.skips`` (``addopts``).
"""

from __future__ import annotations

import pytest

#: (test id, reason) of every skip this process heard; the controller of an xdist run hears them all.
_skipped: list[tuple[str, str]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("allowed_skips", "PREFIX | WHY lines: the skip reasons this suite allows", type="linelist")


def allowed_prefixes(config: pytest.Config) -> tuple[str, ...]:
    lines: list[str] = config.getini("allowed_skips")
    return tuple(prefix for line in lines if (prefix := line.split("|", 1)[0].strip()))


def unlisted(skipped: list[tuple[str, str]], prefixes: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(test, why) for test, why in skipped if not (prefixes and why.startswith(prefixes))]


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append((report.nodeid, _reason(report)))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A whole module skipped as it is collected (``pytest.importorskip`` at its top): none of its
    tests ran. An xdist controller hears each such report once."""
    if report.skipped:
        _skipped.append((report.nodeid, _reason(report)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: its controller hears every report
        return
    if unlisted(_skipped, allowed_prefixes(session.config)) and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    found = unlisted(_skipped, allowed_prefixes(config))
    if found:
        terminalreporter.section("skipped for a reason not on allowed_skips: these tests did not run", red=True)
        for test, why in found:
            terminalreporter.line(f"{test}: {why}")
