"""Signoff's own files (core/policy/own_files.py): which strings resolve into its folders, and
the rule that makes such a request wait for the operator whatever the policy allowed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core import wake
from core.decisions import Decision
from core.gate import VerdictOutcome
from core.policy.own_files import OwnFiles, OwnFilesRule, apply
from core.policy.policy import (
    OWN_FILES_KIND,
    ConfigPolicy,
    Outcome,
    PolicyDecision,
    Rule,
)
from core.recheck import recheck
from core.store import Store
from core.tools import SideEffect, Tool
from tests.core.gatekit import make_gate


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OwnFiles:
    """Signoff's folders under a home of this test's, the server started in ``work``."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    data, config = tmp_path / "user/.local/share/signoff", tmp_path / "user/.config/signoff"
    for folder in (data, config, tmp_path / "work"):
        folder.mkdir(parents=True)
    return OwnFiles((data, config), cwd=tmp_path / "work")


def test_paths_into_signoffs_folders_are_found_as_they_resolve(
    folders: OwnFiles, tmp_path: Path
) -> None:
    data = tmp_path / "user/.local/share/signoff"
    config = tmp_path / "user/.config/signoff"
    (tmp_path / "innocent").symlink_to(data)
    cases = {
        "~/.config/signoff/config.toml": config / "config.toml",
        f"{data}/../signoff/signoff.db": data / "signoff.db",
        f"{tmp_path}/innocent/signoff.db": data / "signoff.db",  # a link into the folder
        "../user/.config/signoff/pins/abc.json": config / "pins/abc.json",  # from the cwd
        f"file://{config}/config.toml": config / "config.toml",
        f"file://localhost{config}/config%2Etoml": config / "config.toml",
        "~\\.config\\signoff\\config.toml": config / "config.toml",
        str(config): config,  # the folder itself
        f"sqlite3 {data}/signoff.db 'delete from events'": data / "signoff.db",  # a word
        f"--database={data}/signoff.db": data / "signoff.db",
    }
    for text, where in cases.items():
        assert folders.touched({"path": text}) == (str(where),), text


def test_any_string_at_any_depth_counts_keys_too(folders: OwnFiles, tmp_path: Path) -> None:
    config = tmp_path / "user/.config/signoff/config.toml"
    assert folders.touched({"a": [{"b": {"c": ["x", "~/.config/signoff/config.toml"]}}]}) == (
        str(config),
    )
    assert folders.touched({"files": {"~/.config/signoff/config.toml": "rules"}}) == (str(config),)


def test_paths_elsewhere_and_text_that_is_no_path_touch_nothing(
    folders: OwnFiles, tmp_path: Path
) -> None:
    data = tmp_path / "user/.local/share/signoff"
    for text in (
        "~/notes.txt",
        f"{data}-old/signoff.db",  # beside the folder, not in it
        f"{data}/../signoff-backup",
        f"https://example.com{data}/signoff.db",  # a URL names no local file
        "hello world",
        "",
        "x" * 5000,
        f"{data}\0/x",
    ):
        assert folders.touched({"text": text}) == (), text


def test_a_relative_path_names_nothing_where_the_servers_directory_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.chdir(tmp_path)
    assert OwnFiles((data,), cwd=tmp_path).touched({"path": "data/signoff.db"}) == (
        str(data / "signoff.db"),
    )
    assert OwnFiles((data,), cwd=tmp_path).touched({"path": "data"}) == (str(data),)
    assert OwnFiles((data,), cwd=None).touched({"path": "data/signoff.db"}) == ()
    # Where the server starts in Signoff's folder, every relative name is in it.
    assert OwnFiles((data,), cwd=data).touched({"p": "notes"}) == (
        str(data / "notes"), str(data / "p"),
    )  # fmt: skip


def test_a_link_that_climbs_out_is_followed_before_its_dots_and_folded_after(
    tmp_path: Path,
) -> None:
    """``link/../x``: the system takes ``..`` after the link, a server folding the text takes
    it before; a path that lands in Signoff's folder either way counts."""
    data = tmp_path / "data"
    (data / "inner").mkdir(parents=True)
    (tmp_path / "link").symlink_to(data / "inner")
    own = OwnFiles((data,))
    assert own.touched({"p": f"{tmp_path}/link/../signoff.db"}) == (str(data / "signoff.db"),)
    (tmp_path / "out").mkdir()
    (data / "away").symlink_to(tmp_path / "out")
    assert own.touched({"p": f"{data}/away/../signoff.db"}) == (str(data / "signoff.db"),)


def test_the_platforms_folders_count_whatever_home_is_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("SIGNOFF_HOME", str(tmp_path / "elsewhere"))
    own = OwnFiles.of(cwd=None)
    config = tmp_path / "user/.config/signoff/config.toml"
    assert own.touched({"p": "~/.config/signoff/config.toml"}) == (str(config),)
    assert own.touched({"p": f"{tmp_path}/elsewhere/signoff.db"}) != ()


@pytest.mark.guarantee("G-FILES-2")
def test_the_rule_turns_an_allow_into_an_own_files_approval_and_leaves_a_deny(
    folders: OwnFiles,
) -> None:
    touching = {"path": "~/.config/signoff/config.toml"}
    for allowed in (PolicyDecision(Outcome.ALLOW, "ok"), PolicyDecision(Outcome.APPROVE, "",
                                                                         "read_only")):  # fmt: skip
        decision = apply(folders, allowed, touching)
        assert (decision.outcome, decision.kind) == (Outcome.APPROVE, OWN_FILES_KIND)
        assert decision.reason.startswith("touches Signoff's own files: \"")
    for refused in (PolicyDecision(Outcome.DENY, "no"), PolicyDecision(Outcome.ABORT, "stop")):
        assert apply(folders, refused, touching) == refused
    allowed = PolicyDecision(Outcome.ALLOW, "ok")
    assert apply(folders, allowed, {"path": "~/notes.txt"}) == allowed


@pytest.mark.guarantee("G-FILES-2")
def test_a_librarys_gate_with_the_rule_waits_and_a_recheck_sees_no_difference(
    gate_store: Store, folders: OwnFiles
) -> None:
    policy = ConfigPolicy({SideEffect.READ_ONLY: Rule.ALLOW})
    read = Tool("read", "Read a file", {"type": "object"}, SideEffect.READ_ONLY, lambda a: "x")
    gate = make_gate(gate_store, [read], policy=OwnFilesRule(policy, folders))
    session = gate.begin("r", "goal")
    step = session.step()
    assert step is not None
    verdict = step.propose(Decision.tool_call("read", {"path": "~/.config/signoff/config.toml"}))
    assert verdict.outcome == VerdictOutcome.PENDING and verdict.approval is not None
    assert verdict.approval.kind == OWN_FILES_KIND
    assert recheck(gate_store, "r", policy).differences == ()  # the rule is not the policy's
    denying = ConfigPolicy({SideEffect.READ_ONLY: Rule.DENY})
    [difference] = recheck(gate_store, "r", denying).differences
    assert (difference.then.kind, difference.now.outcome) == (OWN_FILES_KIND, Outcome.DENY)


def test_the_filesystems_root_is_never_taken_for_signoffs_folder() -> None:
    assert OwnFiles((Path("/"),)).touched({"p": "/etc/passwd"}) == ()


@pytest.mark.guarantee("G-FILES-2")
def test_a_folder_above_signoffs_counts_for_a_mutating_call_and_lists_are_split(
    folders: OwnFiles, tmp_path: Path
) -> None:
    """Moving or deleting ~/.config takes Signoff's configuration with it; a path list hides
    nothing behind a comma or a colon."""
    config = tmp_path / "user/.config/signoff"
    move = {"source": "/tmp/evil", "destination": "~/.config"}
    assert folders.touched(move, mutating=True) == (str(tmp_path / "user/.config"),)
    assert folders.touched(move) == ()  # listing ~/.config reads no Signoff file
    for joined in (f"/etc/hosts,{config}/config.toml", f"/etc:{config}/config.toml"):
        assert folders.touched({"paths": joined}) == (str(config / "config.toml"),), joined


@pytest.mark.guarantee("G-FILES-2")
def test_a_request_naming_more_paths_than_are_checked_waits(folders: OwnFiles) -> None:
    from core.policy.own_files import MOST_CHECKED, TOO_MANY

    words = " ".join(f"/tmp/n{i}" for i in range(MOST_CHECKED + 1))
    assert folders.touched({"text": words})[-1] == TOO_MANY
    assert folders.touched({"text": "/tmp/a /tmp/b"}) == ()


def test_a_relative_word_is_never_taken_for_a_folder_above(tmp_path: Path) -> None:
    """A server started above the home (as some hosts start them, in /): "home" in a commit
    message is prose."""
    own = OwnFiles((tmp_path / "home/user/.config/signoff",), cwd=tmp_path)
    (tmp_path / "home/user/.config/signoff").mkdir(parents=True)
    assert own.touched({"message": "update the home page"}, mutating=True) == ()
    assert own.touched({"text": "see <img src='x'/> or a / b"}, mutating=True) == ()
    assert own.touched({"path": "/"}, mutating=True) == ("/",)  # the whole argument: it counts
    assert own.touched({"path": str(tmp_path / "home")}, mutating=True) == (str(tmp_path / "home"),)


@pytest.mark.guarantee("G-FILES-2")
def test_a_folder_above_signoffs_named_relatively_counts_for_a_mutating_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy started in the home: ``.config``, ``./.config`` and ``.local/share`` (which holds
    the database) name the same folders as ``~/.config``; moving one takes Signoff's along."""
    home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(home))
    data, config = home / ".local/share/signoff", home / ".config/signoff"
    for folder in (data, config):
        folder.mkdir(parents=True)
    own = OwnFiles((data, config), cwd=home)
    cases = {
        ".config": ".config",
        "./.config": ".config",
        ".local/share": ".local/share",
        "~/.config ": ".config",
        "~%2F.config": ".config",
        "user/.config": ".config",
    }
    for name, folder in ((n, home / f) for n, f in cases.items()):
        at = own if name != "user/.config" else OwnFiles((data, config), cwd=tmp_path)
        assert at.touched({"source": name, "destination": "/tmp/x"}, mutating=True) == (
            str(folder),
        ), name
        assert at.touched({"path": name}) == (), name  # listing it reads no Signoff file
    assert own.touched({"message": "move .config later"}, mutating=True) == ()  # prose
    for word in (".", "..", "home"):  # a bare word, from a server started in / or the home
        at = OwnFiles((data, config), cwd=Path("/") if word == "home" else home)
        assert at.touched({"path": word}, mutating=True) == (), word
    url = f"file://{config}?x"
    assert own.touched({"uri": url}) == (str(config),)  # with or without what follows the ?


@pytest.mark.guarantee("G-FILES-2")
def test_a_path_with_percent_escapes_is_read_decoded_too(folders: OwnFiles, tmp_path: Path) -> None:
    """A server may decode ``%2e`` in a path it is given; a ``file:`` URL always is."""
    config = tmp_path / "user/.config/signoff"
    for text in (f"{config}/config%2Etoml", f"{tmp_path}/user/.config/%73ignoff/config.toml",
                 f"{config}/pins/%2e%2e/config.toml"):  # fmt: skip
        assert str(config / "config.toml") in folders.touched({"path": text}), text
    outside = f"{tmp_path}/user/.config/%2e%2e/%2e%2e/elsewhere"
    assert folders.touched({"path": outside}) == ()


@pytest.mark.guarantee("G-FILES-2")
def test_what_trust_rests_on_is_signoffs_own_and_a_wired_host_file_counts_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyring package's configuration (a planted keyringrc.cfg chose the keyring), the
    keyring lock in Signoff's cache (a folder there stopped every decision), Signoff's
    installation, and a host file wired to ``signoff proxy`` (rewritten, the host starts
    something else) are Signoff's own; the wired file counts as itself, not its folder (the
    home): a file beside it is not. An allow rule does not let such a request through."""
    import json
    import pwd
    import sys

    import core

    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    wired = {"mcpServers": {"files": {"command": "signoff", "args": ["proxy", "files"]}}}
    (home / ".claude.json").write_text(json.dumps(wired))
    own = OwnFiles.of(tmp_path / "db/signoff.db", tmp_path / "cfg/config.toml", cwd=home)
    real_home = Path(pwd.getpwuid(os.geteuid()).pw_dir)
    named = {
        "~/.config/python_keyring/keyringrc.cfg": home / ".config/python_keyring/keyringrc.cfg",
        f"{real_home}/.config/python_keyring/keyringrc.cfg":
            real_home / ".config/python_keyring/keyringrc.cfg",
        f"{real_home}/.cache/signoff/secret-service.lock":
            real_home / ".cache/signoff/secret-service.lock",
        "~/.claude.json": home / ".claude.json",
        str(Path(core.__file__).parent / "gate.py"): Path(core.__file__).parent / "gate.py",
    }  # fmt: skip
    if sys.prefix != sys.base_prefix:
        named[f"{sys.prefix}/bin/activate"] = Path(sys.prefix) / "bin/activate"
    for text, where in named.items():
        assert own.touched({"path": text}) == (os.path.realpath(where),), text
    assert own.touched({"path": "~/notes.txt"}) == ()  # beside the wired file: not Signoff's
    stdlib = Path(os.__file__).parent  # a sitecustomize.py there runs in every Signoff process
    if os.access(stdlib, os.W_OK):
        site = stdlib / "sitecustomize.py"
        assert own.touched({"path": str(site)}) == (os.path.realpath(site),)
    allowed = PolicyDecision(Outcome.ALLOW, "an allow rule")
    decided = apply(own, allowed, {"path": "~/.claude.json"}, mutating=True)
    assert decided.outcome is Outcome.APPROVE and decided.kind == OWN_FILES_KIND


@pytest.mark.guarantee("G-FILES-2")
def test_a_project_file_wired_to_signoff_is_signoffs_own_where_the_proxy_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wired with ``--file`` (or written by hand) in the project the agent works in: rewriting
    it decides what the host starts next instead of Signoff, so it is Signoff's own; so is
    every file Signoff's record of its writes names, wherever it lies."""
    import json

    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    project = tmp_path / "project"
    wired = {"mcpServers": {"files": {"command": "signoff", "args": ["proxy", "files"]}}}
    for name in (".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(json.dumps(
            {"servers": wired["mcpServers"]} if name.startswith(".vscode") else wired
        ))  # fmt: skip
    (project / "notes.mcp.json").write_text(json.dumps(wired))  # no host reads it
    elsewhere = tmp_path / "other" / "team.json"
    config = tmp_path / "cfg" / "config.toml"
    (config.parent / "host-backups").mkdir(parents=True)
    write = {"original": str(elsewhere), "backup": "x", "host": "cursor",
             "written_sha256": "0", "time": "t", "undone": None}  # fmt: skip
    manifest = config.parent / "host-backups" / "manifest.json"
    manifest.write_text(json.dumps({"version": 1, "writes": [write]}))
    own = OwnFiles.of(tmp_path / "db/signoff.db", config, cwd=project)
    for text in (".mcp.json", "./.cursor/mcp.json", f"{project}/.vscode/mcp.json", str(elsewhere)):
        assert own.touched({"path": text}, mutating=True), text
    assert own.touched({"path": "notes.mcp.json"}, mutating=True) == ()
    allowed = PolicyDecision(Outcome.ALLOW, "an allow rule on writes in the project")
    decided = apply(own, allowed, {"path": ".mcp.json", "text": "{}"}, mutating=True)
    assert decided.outcome is Outcome.APPROVE and decided.kind == OWN_FILES_KIND


@pytest.mark.guarantee("G-FILES-2")
def test_the_folders_a_deep_homes_sockets_go_to_are_signoffs_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A home too deep for a socket's path has its sockets in a fallback folder (decision
    0074): writing there could put another listener in the app's place, so a request naming
    it, or the fallbacks' folder of any home, waits as one naming Signoff's own files."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    monkeypatch.setenv("SIGNOFF_HOME", str(deep))
    sockets = wake.runtime_dir()
    assert not sockets.is_relative_to(deep)  # the fallback is in use
    own = OwnFiles.of(cwd=None)
    uid = os.geteuid()
    for named in (sockets / "wake.sock", sockets / "proxies" / "1-abcdef01.sock",
                  Path(f"/tmp/signoff-{uid}/0123/app.sock"),
                  Path(f"/run/user/{uid}/signoff/0123/app.sock")):  # fmt: skip
        assert own.touched({"path": str(named)}) != (), named
    monkeypatch.setenv("SIGNOFF_HOME", "~/not-deep")
    assert wake.natural_runtime_dir() == Path.home().resolve() / "not-deep" / "run"
