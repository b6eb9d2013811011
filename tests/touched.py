"""The tests of what a change touched, for the developer's quick loop (``make quick``):

    python -m tests.touched [BASE]

prints the test files, one per line, for the files changed since BASE (by default the last
commit, ``HEAD``), uncommitted and untracked files included:

- a test file: itself;
- a module of Signoff: the test files of its package's tests (``core/proxy/`` →
  ``tests/proxy/``, ``app/`` → ``tests/app/``, the rest of ``core/`` → ``tests/core/``) that
  import it by name, and the test files named after it (``test_NAME*.py``) wherever they are;
- a helper of the tests (``tests/``): the test files that import it, wherever they are;
- the docs and the README: tests/test_docs.py, which checks them.

Only direct imports count, and only in the package's own tests: the store, which nearly every
test imports, would bring nearly the whole suite, and the quick loop is for the next two
minutes, not the last word. ``make test`` runs everything.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS_TESTS = ("tests/test_docs.py",)


def changed(base: str) -> list[str]:
    """The files changed since ``base``, committed or not, and the untracked ones."""

    def git(*args: str) -> list[str]:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True)  # fmt: skip
        return [line for line in done.stdout.splitlines() if line]

    return sorted({*git("diff", "--name-only", base), *git("ls-files", "--others",
                                                           "--exclude-standard")})  # fmt: skip


def module_of(path: str) -> str | None:
    """``core/proxy/server.py`` → ``core.proxy.server``; None for what is not a module."""
    if not path.endswith(".py") or not path.startswith(("core/", "app/", "tests/")):
        return None
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, module: str) -> bool:
    """Whether ``source`` imports ``module``: ``import a.b.c``, ``from a.b.c import x``, or
    ``from a.b import c``."""
    package, _, name = module.rpartition(".")
    return bool(
        re.search(rf"^\s*(from|import)\s+{re.escape(module)}\b", source, re.MULTILINE)
        or (package and re.search(
            rf"^\s*from\s+{re.escape(package)}\s+import\s+(\([^)]*|[^\n]*)\b{re.escape(name)}\b",
            source, re.MULTILINE))
    )  # fmt: skip


def package_tests(path: str) -> str:
    """The folder of the tests of a module's package (ARCHITECTURE.md: tests mirror them)."""
    if path.startswith("core/proxy/"):
        return "tests/proxy/"
    if path.startswith("app/"):
        return "tests/app/"
    return "tests/core/"


def tests_for(paths: list[str]) -> list[str]:
    test_files = sorted(p.relative_to(ROOT) for p in (ROOT / "tests").rglob("test_*.py"))
    sources = {str(p): (ROOT / p).read_text() for p in test_files}
    wanted: set[str] = set()
    for path in paths:
        name = Path(path).name
        if path.startswith("tests/") and name.startswith("test_") and name.endswith(".py"):
            if (ROOT / path).exists():
                wanted.add(path)
            continue
        if path.startswith("docs/") or path == "README.md":
            wanted.update(DOCS_TESTS)
            continue
        module = module_of(path)
        if module is None:
            continue
        stem = Path(path).stem
        where = "tests/" if path.startswith("tests/") else package_tests(path)
        for test, source in sources.items():
            named = Path(test).name.startswith(f"test_{stem}")
            if named or (test.startswith(where) and imports(source, module)):
                wanted.add(test)
    return sorted(wanted)


def main(argv: list[str]) -> int:
    base = argv[0] if argv else "HEAD"
    for test in tests_for(changed(base)):
        print(test)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
