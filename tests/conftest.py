"""Shared fixtures: real SQLite files in tmp_path, real keyring backends, real subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from core import wake
from core.store import Store

ROOT = Path(__file__).resolve().parent.parent
IN_CI = bool(os.environ.get("CI"))
# The console script installed beside this interpreter: the entry point a person runs.
SIGNOFF = Path(sys.executable).with_name("signoff")
TESTS_NICENESS = 5  # added to a test process's niceness once its desktop's daemons run


class MissingSystemPart(RuntimeError):
    """A system part the test needs is missing, in CI: the test fails, and not on an assertion,
    so a mutation's run never counts it as the claim seen broken (tests/mutants/runner.py)."""


def need(condition: bool, reason: str) -> None:
    """Skip locally when a system part is missing; in CI a missing part is a failure."""
    if condition:
        return
    if IN_CI:
        raise MissingSystemPart(f"CI must provide this: {reason}")
    pytest.skip(reason)


# A folder name that puts a home's sockets past a socket address's 107 bytes wherever it is.
DEEP = ("a-home-deeper-than-the-107-bytes-a-unix-socket-path-holds-" * 3).rstrip("-")


def _private_home(path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path.mkdir(mode=0o700)
    monkeypatch.setenv("SIGNOFF_HOME", str(path))
    sockets = wake.fitting_runtime_dir(path / "run")
    yield path
    if not sockets.is_relative_to(path):  # the folder its sockets had outside it: removed
        shutil.rmtree(sockets, ignore_errors=True)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private SIGNOFF_HOME (0700) for this test."""
    yield from _private_home(tmp_path / "home", monkeypatch)


@pytest.fixture
def deep_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private SIGNOFF_HOME of 150 characters and more: its sockets' paths in ``run/`` would
    pass what a socket address holds, so they are elsewhere (core/wake.py rule 6)."""
    yield from _private_home(tmp_path / DEEP, monkeypatch)


@pytest.fixture
def store(home: Path) -> Iterator[Store]:
    with Store.open(home / "signoff.db") as s:
        yield s


def run_signoff(
    *args: str,
    env: dict[str, str] | None = None,
    home: Path | None = None,
    ok: bool = False,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``signoff`` command as a real subprocess, as a person runs it: this
    process's environment, plus ``env``, with ``SIGNOFF_HOME`` set to ``home`` when given.
    ``ok``: fail the test unless it exits 0. Every test runs the CLI through this."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    if home is not None:
        full_env["SIGNOFF_HOME"] = str(home)
    done = subprocess.run(
        [str(SIGNOFF), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )
    if ok:
        assert done.returncode == 0, (f"signoff {' '.join(args)}", done.stdout, done.stderr)
    return done


class KeyringUnderTest:
    """A real keyring backend, in this process and for the subprocesses a test starts."""

    def __init__(self, name: str, backend: object, env: dict[str, str]) -> None:
        self.name = name
        self.backend = backend
        self.env = env


def _secret_service_problem() -> str | None:
    from keyring.backends import SecretService

    try:
        SecretService.Keyring.priority  # noqa: B018  # raises when no Secret Service answers
        SecretService.Keyring().get_password("signoff-tests", "probe")
    except Exception as e:  # any failure means: no usable Secret Service here
        return f"no usable Secret Service on the session bus ({e}); run the tests with make test"
    return None


@pytest.fixture(params=["secret-service", "file"])
def keyring_under_test(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> KeyringUnderTest:
    """The real Secret Service (gnome-keyring, started by the test command) and keyrings.alt's
    file backend: two implementations Signoff did not write."""
    if request.param == "secret-service":
        problem = _secret_service_problem()
        need(problem is None, problem or "")
        from keyring.backends import SecretService

        return KeyringUnderTest(
            "secret-service",
            SecretService.Keyring(),
            {"PYTHON_KEYRING_BACKEND": "keyring.backends.SecretService.Keyring"},
        )
    from keyrings.alt.file import PlaintextKeyring

    data = tmp_path / "keyring-data"
    data.mkdir()
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    return KeyringUnderTest(
        "file",
        PlaintextKeyring(),
        {
            "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
            "XDG_DATA_HOME": str(data),
        },
    )


NO_KEYRING_ENV = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}


@pytest.fixture
def gate_store(home: Path) -> Iterator[Store]:
    """A store whose every committed transaction is traced; at the end of the test the record
    must be complete (no state change without an event) and consistent (events rebuild it)."""
    from tests.core.gatekit import check_completeness, check_consistency

    with Store.open(home / "signoff.db") as s:
        s.trace = []
        yield s
        check_completeness(s)
        check_consistency(s)


def pytest_configure(config: pytest.Config) -> None:
    """Every process that runs tests gets a desktop of its own (tests/private_desktop.py); an
    xdist controller, which runs none, does not."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    from tests.private_desktop import PrivateDesktop

    desktop = PrivateDesktop()
    config.add_cleanup(desktop.close)
    desktop.start()
    # The tests, and all they start, yield to the desktop's daemons, as a person's programs do
    # not crowd out their keyring: the workers side by side keep two cores busy, and a keyring
    # call of the product has 5 s to answer. Lowering one's own priority needs no privilege.
    os.nice(TESTS_NICENESS)


MODAL_WAIT = 30.0  # seconds a modal question may wait for its answer in a test


@pytest.fixture(autouse=True)
def _no_unanswered_modal(request: pytest.FixtureRequest) -> Iterator[None]:
    """A modal question nobody answers fails its test instead of hanging it: a Qt test's nested
    event loop never gives pytest-timeout's signal a chance, so a timer of that loop closes a
    modal widget left waiting MODAL_WAIT seconds, and the test fails naming what it asked."""
    if "qtbot" not in request.fixturenames and "qapp" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("qapp")
    from tests.app.modal_watch import ModalWatch

    watch = ModalWatch(MODAL_WAIT)
    yield
    unanswered = watch.stop()
    if unanswered:
        pytest.fail(f"a modal question waited {MODAL_WAIT:.0f} s with nobody to answer it: "
                    f"{unanswered}")  # fmt: skip


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--guarantee", action="append", default=[], metavar="ID",
        help="run only the tests that back this claim of docs/guarantees.md (repeatable)",
    )  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = set(config.getoption("--guarantee"))
    if wanted:
        keep, drop = [], []
        for item in items:
            ids = {m.args[0] for m in item.iter_markers("guarantee") if m.args}
            (keep if ids & wanted else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    # Under xdist, the slow tests first, each file's in its order: handed out first to the
    # workers (--dist loadgroup), they do not end the run on one worker while the others wait.
    # A run in one process keeps the order it was given (a mutation's run: its first failure).
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A worker under ``--dist loadgroup`` whose grouped tests were not grouped stops the run:
    xdist groups by a suffix of the node id, which some pytest releases silently drop
    (pytest-dev/pytest-xdist#1386), and each worker would then build the bundle again."""
    config = session.config
    if not hasattr(config, "workerinput") or not config.getvalue("loadgroup"):
        return
    for item in session.items:
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
            raise pytest.UsageError(
                f"xdist did not group {item.nodeid}: this pytest and pytest-xdist do not work"
                " together for --dist loadgroup (pytest-dev/pytest-xdist#1386)"
            )
