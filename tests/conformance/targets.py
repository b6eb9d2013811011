"""The servers the suite runs, the files they work on, and a Signoff home configured for each
through the CLI, as an operator would: ``servers add``, ``pin --accept``, ``classify`` (each tool
by its own annotations), and a policy that allows every class, so that the gate lets every step
through and what is compared is the data path alone.

Each target's files are made once per session; ``reset()`` puts back what a run may change, so
the direct run and the proxied run start from the same state at the same paths.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import wave
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import SIGNOFF, run_signoff
from tests.host import tree_under_test
from tests.mcp_servers import (
    ServerCommand,
    everything_server,
    filesystem_server,
    filesystem_server_roots_only,
    git_server,
    memory_server,
    time_server,
)
from tests.proxy.rig import FAKE_SERVER

MUTATING = ("local_mutation", "remote_mutation", "destructive")
SERVERS = ("everything", "filesystem", "filesystem-roots", "memory", "time", "git", "fake")
LARGE_BYTES = 219 * 1024  # the 219 kB file
HUGE_BYTES = 2 * 1024 * 1024  # over the planned default result limit of 1 MiB
# The tool tests/proxy/fake_server.py lists, whose every call it answers with a JSON-RPC error.
REFUSING_TOOL = {
    "name": "refuse",
    "description": "Answers every call with a JSON-RPC error.",
    "inputSchema": {"type": "object"},
    "annotations": {"readOnlyHint": True},
    "icons": [{"src": "https://example.invalid/refuse.png", "mimeType": "image/png"}],
}
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Conformance",
    "GIT_AUTHOR_EMAIL": "conformance@example.invalid",
    "GIT_COMMITTER_NAME": "Conformance",
    "GIT_COMMITTER_EMAIL": "conformance@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


@dataclass
class Target:
    name: str  # the script's key, and the server's name in Signoff
    server: ServerCommand
    places: dict[str, str] = field(default_factory=dict)
    roots_initial: list[Path] = field(default_factory=list)
    roots_changed: list[Path] = field(default_factory=list)
    reset: Callable[[], None] = lambda: None


def lines(size: int, word: str) -> str:
    """Text of ``size`` bytes, numbered lines that each differ."""
    out, total, i = [], 0, 0
    while total < size:
        line = f"{word} {i:07d}: the quick brown fox jumps over the lazy dog\n"
        out.append(line)
        total += len(line)
        i += 1
    return "".join(out)[:size]


def png(width: int = 24, height: int = 16) -> bytes:
    """A small RGB gradient, a valid PNG."""
    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 10 % 256, y * 15 % 256, 128)) for x in range(width))
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def write_wav(path: Path) -> None:
    """A tenth of a second of a saw tone, 8 kHz mono 16-bit."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"".join(struct.pack("<h", (i % 80) * 400 - 16000) for i in range(800)))


def _files(base: Path) -> tuple[Path, Path, Callable[[], None]]:
    shared, outside = base / "shared", base / "outside"

    def reset() -> None:
        for path in (shared, outside):
            if path.exists():
                shutil.rmtree(path)
        (shared / "sub").mkdir(parents=True)
        outside.mkdir()
        (shared / "hello.txt").write_text("hello\n")
        (shared / "sub" / "nested.txt").write_text("nested\n")
        (shared / "image.png").write_bytes(png())
        write_wav(shared / "sound.wav")
        (shared / "data.bin").write_bytes(bytes(range(256)) * 4)
        (shared / "large.txt").write_text(lines(LARGE_BYTES, "large"))
        (shared / "huge.txt").write_text(lines(HUGE_BYTES, "huge"))
        (outside / "secret.txt").write_text("not for the server\n")

    reset()
    return shared.resolve(), outside.resolve(), reset


def _git(*args: str, cwd: Path, date: str) -> None:
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _repository(base: Path) -> Path:
    """Two commits of a 219 kB file, then every line of it changed: a 438 kB diff."""
    repo = base / "repo"
    if repo.exists():  # a run that stopped half-way
        shutil.rmtree(repo)
    repo.mkdir()
    _git("init", "-q", ".", cwd=repo, date="2026-01-01T00:00:00Z")
    (repo / "README.md").write_text("conformance\n")
    _git("add", "README.md", cwd=repo, date="2026-01-01T00:00:00Z")
    _git("commit", "-q", "-m", "First commit", cwd=repo, date="2026-01-01T00:00:00Z")
    (repo / "big.txt").write_text(lines(LARGE_BYTES, "before"))
    _git("add", "big.txt", cwd=repo, date="2026-01-02T00:00:00Z")
    _git("commit", "-q", "-m", "Add big.txt", cwd=repo, date="2026-01-02T00:00:00Z")
    (repo / "big.txt").write_text(lines(LARGE_BYTES, "after "))
    return repo.resolve()


def build(name: str, base: Path) -> Target:
    """The target ``name`` with its files under ``base`` (a directory of its own)."""
    base.mkdir(parents=True, exist_ok=True)
    if name == "everything":
        first, second = base / "root-a", base / "root-b"
        first.mkdir(exist_ok=True)
        second.mkdir(exist_ok=True)
        return Target(
            name, everything_server(), roots_initial=[first], roots_changed=[first, second]
        )
    if name in ("filesystem", "filesystem-roots"):
        shared, outside, reset = _files(base)
        server = (
            filesystem_server(shared) if name == "filesystem" else (filesystem_server_roots_only())
        )
        return Target(
            name,
            server,
            {"shared": str(shared), "outside": str(outside)},
            [shared],
            [shared / "sub"],
            reset,
        )
    if name == "memory":
        memory = base / "memory.jsonl"
        return Target(name, memory_server(memory), reset=lambda: memory.unlink(missing_ok=True))
    if name == "time":
        return Target(name, time_server("UTC"))
    if name == "git":
        repo = _repository(base)
        return Target(name, git_server(repo), {"repo": str(repo)})
    if name == "fake":
        script = base / "fake-script.json"
        script.write_text(json.dumps({"listing": json.dumps([REFUSING_TOOL]),
                                      "on_call": {"refuse": "error"}}))  # fmt: skip
        return Target(name, ServerCommand(sys.executable, [str(FAKE_SERVER), str(script)], {}))
    raise ValueError(f"no target {name}")


# --- the proxy ---------------------------------------------------------------------------


@dataclass
class Proxied:
    """``signoff proxy NAME`` for a home configured for one target."""

    home: Path
    name: str
    env: dict[str, str]

    @property
    def command(self) -> ServerCommand:
        return ServerCommand(str(SIGNOFF), ["proxy", self.name], self.env)


def keyring_env(base: Path) -> dict[str, str]:
    """A file keyring of the suite's own: the keyring is not what the suite compares, and its
    homes then need no session bus."""
    data = base / "keyring-data"
    data.mkdir(parents=True, exist_ok=True)
    return {
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "XDG_DATA_HOME": str(data),
    }


def side_effect(annotations: dict[str, Any]) -> str:
    """The class the tool's own hints point to (annotations may refuse a class, never relax
    one: core/proxy/pins.py)."""
    if annotations.get("destructiveHint") is True:
        return "destructive"
    if annotations.get("readOnlyHint") is True:
        return "read_only"
    return "local_mutation"


# The signoff console script's own entry point, for several command lines in one interpreter:
# each is parsed and run by the CLI exactly as `signoff ARGS` runs it, without paying the
# interpreter's start (about 0.9 s) for each of a server's dozen tools.
BATCH = """
import json, sys
from app.launcher import main
for args in json.loads(sys.argv[1]):
    code = main(args)
    if code:
        sys.exit(f"signoff {' '.join(args)} exited {code}")
"""


def configure(target: Target, base: Path) -> Proxied:
    """A Signoff home under ``base`` serving ``target`` with every tool it lists allowed, and
    its prompts and resources offered, pinned as listed."""
    home = base / "home"
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = {
        **tree_under_test(),
        **keyring_env(base),
        **target.server.env_extra,
        "SIGNOFF_HOME": str(home),
    }

    def signoff(*args: str) -> str:
        return run_signoff(*args, env=env, ok=True).stdout

    passed = [flag for name in target.server.env_extra for flag in ("--env", name)]
    signoff("servers", "add", target.name, *passed, "--", target.server.command,
            *target.server.args)  # fmt: skip
    # Prompts and resources on: a server that declares neither is served as before.
    signoff("servers", "set", target.name, "--prompts", "on", "--resources", "on")
    pinned = json.loads(signoff("pin", target.name, "--accept", "--json"))
    commands = [["classify", target.name, row["tool"], side_effect(row["annotations"])]
                for row in pinned["tools"]]  # fmt: skip
    commands += [["policy", kind, "allow"] for kind in MUTATING]
    done = subprocess.run([sys.executable, "-c", BATCH, json.dumps(commands)],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, **env})  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    return Proxied(home, target.name, env)
