"""What a value means (core/policy/meaning.py, core/policy/judge.py, decision 0064), attacked.
A rule is the operator's sentence about a set of things: it holds for every way of naming a
member. Spellings are generated on a real tree of folders and links; which file a spelling
names is asked of the kernel (``os.stat``: the file opened as written, and as servers that
fold ``..`` in the text, trim it, decode it or read ``\\`` as ``/`` first open it), never of the
code under test."""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.policy import rules
from core.policy.meaning import Where
from core.policy.rules import ArgumentRule, Decided, Effect

NOW = datetime(2026, 12, 5, 21, 0, tzinfo=UTC)
# The tree is made once per test and only read by its examples.
PROPERTY = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
Identity = tuple[int, int]


def rule(effect: Effect, name: str, condition: dict[str, Any]) -> ArgumentRule:
    return ArgumentRule.make("files", "read", effect, rules.on_arguments([(name, condition)]))


def decide(found: ArgumentRule, arguments: Any, cwd: str | None = None) -> Decided:
    where = Where(cwd, folds_case=False)
    return rules.deciding([found], arguments, destructive=False, now=NOW, where=where)


# --- the tree: a folder standing for / and /home/me in it ------------------------------------


@dataclass(frozen=True)
class Tree:
    root: Path  # stands for /
    home: Path  # stands for /home/me, and is $HOME
    dirs: tuple[str, ...]  # real folders a server may run in

    @property
    def private(self) -> Path:
        return self.home / "private"

    @property
    def notes(self) -> Path:
        return self.home / "notes"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Tree:
    root = tmp_path.resolve()  # the temporary folder may itself be reached through a link
    home = root / "home" / "me"
    for folder in ("private/sub", "notes/sub", ".ssh", "notes-x", "privatefoo"):
        (home / folder).mkdir(parents=True)
    (root / "elsewhere").mkdir()
    for file in ("private/secret.txt", "private/sub/deep.txt", "notes/a.md", "notes/sub/b.md",
                 ".ssh/id_rsa", "notes-x/y.md", "privatefoo/z.txt"):  # fmt: skip
        (home / file).write_text("x")
    for file in ("x.txt", "a.md", "secret.txt"):
        (root / "elsewhere" / file).write_text("x")
    (home / "notes/out").symlink_to(home / "private")  # a link out of the notes, into private
    (home / "notes/here").symlink_to("sub")  # a link that stays in the notes
    (root / "into").symlink_to(home / "private")  # a link into private from outside
    (root / "alias").symlink_to(home)  # the home by another name
    # ``..`` after these climbs into the notes, or into private; before them, stays outside.
    (root / "elsewhere/deep").symlink_to(home / "notes/sub")
    (root / "elsewhere/vault").symlink_to(home / "private/sub")
    monkeypatch.setenv("HOME", str(home))
    dirs = (root, home, home / "notes", home / "notes/sub", home / "private", root / "elsewhere")
    return Tree(root, home, tuple(map(str, dirs)))


def identity(path: str | Path) -> Identity:
    info = os.stat(path)
    return info.st_dev, info.st_ino


def members(folder: Path, *, itself: bool) -> set[Identity]:
    """The files and folders in ``folder`` (and it, with ``itself``); a link is not a member,
    what it leads to is judged where it is."""
    found = {identity(folder)} if itself else set()
    for top, folders, files in os.walk(folder):
        for name in folders + files:
            if not os.path.islink(os.path.join(top, name)):
                found.add(identity(os.path.join(top, name)))
    return found


def opened(spelling: str, cwd: str, *, decoded: bool = True) -> set[Identity]:
    """What a server running in ``cwd`` could open for a path ``spelling``, asked of the kernel:
    the path as written, and as a server that folds its ``..`` before opening it, trims it or
    reads ``\\`` as ``/``; with ``decoded``, also as one that first decodes its escapes."""
    found = set()
    forms = {spelling, spelling.strip(), spelling.replace("\\", "/")}
    if decoded:
        forms |= {urllib.parse.unquote(f) for f in forms}
    for form in forms:
        text = os.path.join(cwd, os.path.expanduser(form))
        for each in (text, posixpath.normpath(text)):
            with contextlib.suppress(OSError, ValueError):
                found.add(identity(each))
    return found


# --- spellings of a path ---------------------------------------------------------------------

# Paths from the root, some through a link: inside private, inside the notes, beside both.
TARGETS = (
    "home/me/private/secret.txt", "home/me/private/sub/deep.txt", "home/me/private/sub",
    "home/me/notes/out/secret.txt", "into/secret.txt", "into/sub", "alias/private/secret.txt",
    "home/me/notes/a.md", "home/me/notes/sub/b.md", "home/me/notes/sub", "home/me/notes/here/b.md",
    "alias/notes/a.md", "home/me/.ssh/id_rsa", "home/me/notes-x/y.md", "home/me/privatefoo/z.txt",
    "elsewhere/x.txt", "elsewhere/a.md", "elsewhere/secret.txt", "home/me/private",
    "home/me/notes", "home/me",
)  # fmt: skip
# A segment put in a path to go there and back: ``NAME/..``. Some are links (``..`` after a
# link climbs from where it leads), one is missing.
DETOURS = ("sub", "notes", "private", "out", "into", "alias", "here", "me", "nope", "x.txt",
           "deep", "vault")  # fmt: skip


@st.composite
def noisy(draw: st.DrawFn, segments: list[str]) -> str:
    """``segments`` joined with ``.`` segments, detours, doubled and trailing slashes put in."""
    out: list[str] = []
    for segment in segments:
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(("dot", "detour", "empty")))
            if kind == "dot":
                out.append(".")
            elif kind == "detour":
                out += [draw(st.sampled_from(DETOURS)), ".."]
            else:
                out.append("")
        out.append(segment)
    if draw(st.booleans()):
        out.append("")
    return "/".join(out)


@st.composite
def path_spellings(draw: st.DrawFn, tree: Tree, *, absolute: bool = False) -> tuple[str, str]:
    """A spelling of a path in ``tree`` and the folder the server runs in: absolute, under
    ``/proc/self/root``, ``~``-relative, or relative to that folder; noise everywhere, and
    some separators written ``\\``; unless ``absolute`` (a URL's path), escapes too."""
    target = str(tree.root / draw(st.sampled_from(TARGETS)))
    cwd = draw(st.sampled_from(tree.dirs))
    forms = ("absolute", "proc") if absolute else ("absolute", "proc", "home", "relative")
    form = draw(st.sampled_from(forms))
    if form in ("absolute", "proc"):
        spelled = "/" + draw(noisy(target.split("/")[1:]))
        spelled = "/proc/self/root" + spelled if form == "proc" else spelled
    else:
        base = str(tree.home) if form == "home" else cwd
        spelled = draw(noisy(os.path.relpath(target, base).split("/")))
        if form == "home":
            spelled = "~/" + spelled
        elif spelled.startswith("/"):  # a leading empty segment: relative, not from the root
            spelled = "." + spelled
    if draw(st.integers(0, 4)) == 0:
        cut = draw(st.integers(1, len(spelled)))
        spelled = spelled[:cut] + spelled[cut:].replace("/", "\\")
    if not absolute and draw(st.integers(0, 3)) == 0:
        spelled = draw(escaped(spelled))
    if not absolute and draw(st.integers(0, 6)) == 0:
        spelled += draw(st.sampled_from((" ", "\t", "\u00a0")))
    return spelled, cwd


@st.composite
def escaped(draw: st.DrawFn, text: str) -> str:
    """``text`` with some of its characters (after the first) written as percent-escapes."""
    chosen = draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=12))
    upper = draw(st.booleans())
    out = []
    for index, char in enumerate(text):
        if index in chosen:
            code = "".join(f"%{b:02X}" if upper else f"%{b:02x}" for b in char.encode())
            out.append(code)
        else:
            out.append(char)
    return "".join(out)


@st.composite
def file_urls(draw: st.DrawFn, tree: Tree) -> tuple[str, str]:
    """A ``file:`` URL of a path in ``tree`` and the path it stands for: every authority and
    slash form RFC 8089 allows, escapes of any character (``/`` and ``.`` too)."""
    spelled, _ = draw(path_spellings(tree, absolute=True))
    local = "/" + spelled.lstrip("/")  # ``file:`` + ``//x`` would make x a host
    form = draw(st.sampled_from(("file://", "file://localhost", "FILE://LOCALHOST",
                                 "File://LocalHost", "file:", "file:///")))  # fmt: skip
    return form + draw(escaped(local)), local


@pytest.mark.guarantee("G-RULES-1")
def test_the_generators_name_files_the_kernel_opens(tree: Tree) -> None:
    """The oracle is the kernel: a plain spelling opens its file; one through a link, where it
    leads."""
    secret = tree.private / "secret.txt"
    assert opened(str(secret), "/") == {identity(secret)}
    assert opened("~/private/secret.txt", "/") == {identity(secret)}
    assert opened(f"{tree.root}/into/secret.txt", "/") == {identity(secret)}
    assert opened(f"{tree.notes}/out/..", "/") == {identity(tree.home), identity(tree.notes)}
    outside, inside = identity(tree.root / "elsewhere/a.md"), identity(tree.notes / "a.md")
    assert opened(f"{tree.root}/elsewhere/deep/../a.md", "/") == {outside, inside}
    assert identity(secret) in members(tree.private, itself=False)
    assert identity(tree.private) not in members(tree.private, itself=False)
    assert identity(tree.notes / "sub") in members(tree.notes, itself=False)


# --- (1) no spelling of a member escapes a reject rule ---------------------------------------


@pytest.mark.guarantee("G-RULES-1")
@PROPERTY
@given(data=st.data())
def test_no_spelling_of_a_path_inside_the_folder_escapes_a_reject_rule(
    tree: Tree, data: st.DataObject
) -> None:
    never = rule(Effect.REJECT, "path", rules.under_folder(str(tree.private)))
    inside = members(tree.private, itself=True)
    spelling, cwd = data.draw(path_spellings(tree))
    if opened(spelling, cwd) & inside:
        assert decide(never, {"path": spelling}, cwd).rule == never, (spelling, cwd)
        unknown = decide(never, {"path": spelling})  # the server's folder not known
        assert unknown.rule == never or (unknown.unsure and unknown.doubts), spelling


@pytest.mark.guarantee("G-RULES-1")
@PROPERTY
@given(data=st.data())
def test_no_spelling_of_a_file_url_inside_the_folder_escapes_a_reject_rule(
    tree: Tree, data: st.DataObject
) -> None:
    never = rule(Effect.REJECT, "uri", rules.pattern("^" + re.escape(f"file://{tree.private}/")))
    inside = members(tree.private, itself=False)
    url, local = data.draw(file_urls(tree))
    cwd = data.draw(st.sampled_from((None, *tree.dirs)))
    if opened(local, "/", decoded=False) & inside:
        assert decide(never, {"uri": url}, cwd).rule == never, url


# --- (2) no spelling of what is outside is allowed by an allow rule on the folder ------------


@pytest.mark.guarantee("G-RULES-1")
@PROPERTY
@given(data=st.data())
def test_no_spelling_of_a_path_outside_the_folder_is_allowed(
    tree: Tree, data: st.DataObject
) -> None:
    notes = rule(Effect.ALLOW, "path", rules.under_folder(str(tree.notes)))
    inside = members(tree.notes, itself=True)
    spelling, cwd = data.draw(path_spellings(tree))
    if opened(spelling, cwd) - inside:
        assert decide(notes, {"path": spelling}, cwd).rule is None, (spelling, cwd)


@pytest.mark.guarantee("G-RULES-1")
@PROPERTY
@given(data=st.data())
def test_no_spelling_of_a_file_url_outside_the_folder_is_allowed(
    tree: Tree, data: st.DataObject
) -> None:
    notes = rule(Effect.ALLOW, "uri", rules.pattern("^" + re.escape(f"file://{tree.notes}/")))
    inside = members(tree.notes, itself=False)
    url, local = data.draw(file_urls(tree))
    if opened(local, "/", decoded=False) - inside:
        assert decide(notes, {"uri": url}).rule is None, url


# --- (3) the rules' own plain spellings decide as before -------------------------------------


def files(tree: Tree) -> Iterator[Path]:
    for top, _, names in os.walk(tree.root):
        for name in names:
            yield Path(top, name)


@pytest.mark.guarantee("G-RULES-1")
def test_a_plain_spelling_is_decided_as_it_reads(tree: Tree) -> None:
    never = rule(Effect.REJECT, "path", rules.under_folder(str(tree.private)))
    notes = rule(Effect.ALLOW, "path", rules.under_folder(str(tree.notes)))
    never_url = rule(
        Effect.REJECT, "uri", rules.pattern("^" + re.escape(f"file://{tree.private}/"))
    )
    notes_url = rule(Effect.ALLOW, "uri", rules.pattern("^" + re.escape(f"file://{tree.notes}/")))
    for file in files(tree):
        in_private, in_notes = tree.private in file.parents, tree.notes in file.parents
        for cwd in (None, *tree.dirs):
            for found, name, value, expected in (
                (never, "path", str(file), in_private), (notes, "path", str(file), in_notes),
                (never_url, "uri", f"file://{file}", in_private),
                (notes_url, "uri", f"file://{file}", in_notes),
            ):  # fmt: skip
                decided = decide(found, {name: value}, cwd)
                assert (decided.rule == found) is expected, (found.effect, value, cwd)
                assert not decided.doubts, value
    for name in ("a.md", "sub/b.md", "./a.md", "sub"):
        assert decide(notes, {"path": name}, str(tree.notes)).rule == notes, name
    assert decide(never, {"path": "secret.txt"}, str(tree.private)).rule == never


# --- http(s) URIs ----------------------------------------------------------------------------

HOST = "docs.example.com"
WEB_TARGETS = (("private", "s.txt"), ("private", "sub", "t"), ("notes", "a.md"),
               ("notes", "sub", "b"), ("notes-x", "y"), ("privatefoo", "z"), ("admin",),
               ("notes",), ("private",))  # fmt: skip
DOTS = {".": (".", "%2e", "%2E"), "..": ("..", "%2e%2e", "%2E%2e", ".%2e", "%2E.")}


@st.composite
def web_urls(draw: st.DrawFn) -> tuple[str, str]:
    """An http(s) URL spelled any way RFC 3986 section 6 calls the same, and the URL it is:
    scheme and host in any case, the default port, escapes of unreserved characters, dot
    segments (escaped too), and detours above the root."""
    scheme = draw(st.sampled_from(("https", "https", "http")))
    segments = list(draw(st.sampled_from(WEB_TARGETS)))
    out: list[str] = []
    if draw(st.booleans()):
        out.append(draw(st.sampled_from(DOTS[".."])))  # above the root: stays at the root
    for segment in segments:
        for _ in range(draw(st.integers(0, 2))):
            if draw(st.booleans()):
                out.append(draw(st.sampled_from(DOTS["."])))
            else:
                out += [draw(st.sampled_from(("x", "notes", "private"))),
                        draw(st.sampled_from(DOTS[".."]))]  # fmt: skip
        out.append(draw(escaped(" " + segment))[1:])
    host = "".join(c.upper() if draw(st.booleans()) else c for c in HOST)
    port = draw(st.sampled_from(("", ":443" if scheme == "https" else ":80")))
    spelled_scheme = "".join(c.upper() if draw(st.booleans()) else c for c in scheme)
    url = f"{spelled_scheme}://{host}{port}/" + "/".join(out)
    return url, f"{scheme}://{HOST}/" + "/".join(segments)


@pytest.mark.guarantee("G-RULES-1")
@PROPERTY
@given(spelled=web_urls())
def test_no_spelling_of_a_web_url_escapes_a_reject_rule_or_widens_an_allow(
    spelled: tuple[str, str],
) -> None:
    url, meant = spelled
    never = rule(Effect.REJECT, "url", rules.pattern("^https://docs\\.example\\.com/private/"))
    docs = rule(Effect.ALLOW, "url", rules.pattern("^https://docs\\.example\\.com/notes/"))
    if meant.startswith(f"https://{HOST}/private/"):
        assert decide(never, {"url": url}).rule == never, url
    if not meant.startswith(f"https://{HOST}/notes/"):
        assert decide(docs, {"url": url}).rule is None, url
    else:  # a plain spelling, and any other the RFC calls the same, is allowed
        assert decide(docs, {"url": meant}).rule == docs
        assert decide(docs, {"url": url}).rule == docs, url


# --- recipients ------------------------------------------------------------------------------

EVIL, TEAM = "evil@x.com", ("me@team.org", "ann@team.org")


@st.composite
def recipient(draw: st.DrawFn, address: str) -> str:
    """``address`` in any case, bare, bracketed or with a name, spaces around it, its local part
    perhaps quoted, its domain perhaps in fullwidth letters (IDNA, as Python's sockets resolve a
    name, reads them)."""
    cased = "".join(c.upper() if draw(st.booleans()) else c for c in address)
    name, domain = cased.split("@")
    if draw(st.integers(0, 4)) == 0:
        domain = "".join(chr(ord(c) + 0xFEE0) if c.isalpha() else c for c in domain)
    if draw(st.integers(0, 4)) == 0:  # a quoted local part: the same mailbox (RFC 5321)
        name = f'"{name}"'
    cased = f"{name}@{domain}"
    form = draw(st.sampled_from(("{}", "<{}>", "Someone <{}>", '"Some One" <{}>', " {} ")))
    return form.format(cased)


@st.composite
def recipients(draw: st.DrawFn) -> tuple[Any, list[str]]:
    """Recipients as one string, a list, or a list of strings each holding several; and the
    addresses they are."""
    chosen = draw(st.lists(st.sampled_from((EVIL, *TEAM)), min_size=1, max_size=4))
    spelled = [draw(recipient(a)) for a in chosen]
    shape = draw(st.sampled_from(("one", "list", "joined", "split")))
    if shape == "one" and len(spelled) == 1:
        return spelled[0], chosen
    if shape == "joined":
        return ", ".join(spelled), chosen
    if shape == "split" and len(spelled) > 1:
        return [", ".join(spelled[:2]), *spelled[2:]], chosen
    return spelled, chosen


@pytest.mark.guarantee("G-RULES-1")
@PROPERTY
@given(spelled=recipients())
def test_a_recipient_rule_holds_however_the_recipients_are_written(
    spelled: tuple[Any, list[str]],
) -> None:
    value, addresses = spelled
    never = rule(Effect.REJECT, "to", rules.one_of([EVIL]))
    team = rule(Effect.ALLOW, "to", rules.one_of(list(TEAM)))
    assert (decide(never, {"to": value}).rule == never) is (EVIL in addresses), value
    assert (decide(team, {"to": value}).rule == team) is (EVIL not in addresses), value


# --- the spellings the issue quotes ----------------------------------------------------------


@pytest.mark.guarantee("G-RULES-1")
def test_the_quoted_file_urls_do_not_escape_a_reject_rule_on_a_folder(tree: Tree) -> None:
    home = tree.home
    never = rule(Effect.REJECT, "uri", rules.pattern("^" + re.escape(f"file://{home}/private/")))
    for url in (f"file://{home}/./private/secret.txt", f"file://localhost{home}/private/secret.txt",
                f"file://{home}/%70rivate/secret.txt"):  # fmt: skip
        assert decide(never, {"uri": url}).rule == never, url


@pytest.mark.guarantee("G-RULES-1")
def test_an_escaped_dot_dot_does_not_widen_an_allow_rule_on_a_folder(tree: Tree) -> None:
    home = tree.home
    notes = rule(Effect.ALLOW, "uri", rules.pattern("^" + re.escape(f"file://{home}/notes/")))
    assert decide(notes, {"uri": f"file://{home}/notes/a.md"}).rule == notes
    assert decide(notes, {"uri": f"file://{home}/notes/%2e%2e/private/secret.txt"}).rule is None


@pytest.mark.guarantee("G-RULES-1")
def test_the_quoted_paths_do_not_escape_a_reject_rule_on_the_keys(tree: Tree) -> None:
    keys = rule(Effect.REJECT, "path", rules.under_folder(f"{tree.home}/.ssh"))
    for path in ("~/.ssh/id_rsa", ".ssh/id_rsa", f"/proc/self/root{tree.home}/.ssh/id_rsa"):
        assert decide(keys, {"path": path}, str(tree.home)).rule == keys, path


@pytest.mark.guarantee("G-RULES-1")
def test_a_path_with_white_space_around_it_is_also_the_path_trimmed(tree: Tree) -> None:
    """A server that trims its arguments (and Windows, a name's trailing space) opens the keys."""
    keys = rule(Effect.REJECT, "path", rules.under_folder(f"{tree.home}/.ssh"))
    for path in (f"{tree.home}/.ssh ", f" {tree.home}/.ssh/id_rsa", "~/.ssh\u00a0"):
        assert decide(keys, {"path": path}, str(tree.home)).rule == keys, path


@pytest.mark.guarantee("G-RULES-1")
def test_a_reject_rule_on_a_recipient_refuses_a_list_holding_it() -> None:
    never = rule(Effect.REJECT, "to", rules.one_of([EVIL]))
    assert decide(never, {"to": ["evil@x.com", "me@team.org"]}).rule == never


# --- what the families did not cover -------------------------------------------------


def asked_or_refused(found: ArgumentRule, decided: Decided) -> bool:
    """A reject rule that matched, or could not be ruled out (asked, saying why)."""
    return decided.rule == found or (
        decided.rule is None and decided.unsure and bool(decided.doubts)
    )


@pytest.mark.guarantee("G-RULES-1")
def test_a_value_a_reject_rule_cannot_read_is_asked_not_let_past(tree: Tree) -> None:
    """A relative path with no known folder, a file URL naming a port or no absolute path, an
    escape that does not decode, a control character, recipients not separated as addresses
    are: a reject rule that does not match them could still hold for them."""
    private = tree.private
    never = rule(Effect.REJECT, "uri", rules.pattern("^" + re.escape(f"file://{private}/")))
    for url in (f"file://localhost:{private}/secret.txt", f"file://localhost:0{private}/secret.txt",
                f"file:{private.relative_to('/')}/secret.txt", f"file://{private}/secret.txt%00",
                f"file://{tree.notes}/%zz/../../private/secret.txt", f"{private}/secret.txt",
                f"file://{tree.notes}/x?/../../private/secret.txt"):  # fmt: skip
        assert asked_or_refused(never, decide(never, {"uri": url})), url
    keys = rule(Effect.REJECT, "path", rules.under_folder(f"{tree.home}/.ssh"))
    for path in ("id_rsa", "./id_rsa", f"{tree.home}/.ssh/id%0a"):
        assert asked_or_refused(keys, decide(keys, {"path": path})), path
    evil = rule(Effect.REJECT, "to", rules.one_of([EVIL]))
    for to in ("me@team.org evil@x.com", "me@team.org\nevil@x.com", ["me@team.org evil@x.com"]):
        assert asked_or_refused(evil, decide(evil, {"to": to})), to


@pytest.mark.guarantee("G-RULES-1")
def test_a_file_url_naming_another_machine_is_judged_as_the_local_path_too(tree: Tree) -> None:
    """``urlsplit(uri).path`` ignores the host: a server reading that opens the local file."""
    never = rule(Effect.REJECT, "uri", rules.pattern("^" + re.escape(f"file://{tree.private}/")))
    for host in ("elsewhere", "127.0.0.1", "user@localhost", "[::1]"):
        url = f"file://{host}{tree.private}/secret.txt"
        assert decide(never, {"uri": url}).rule == never, url


@pytest.mark.guarantee("G-RULES-1")
def test_a_file_url_is_not_allowed_as_less_than_some_readers_take_from_it(tree: Tree) -> None:
    """``Path.from_uri`` keeps a ``?`` or ``#`` in the path; WHATWG parsers read ``\\`` (and
    Node's ``fileURLToPath`` a decoded ``%5c``) as ``/``: each of these climbs out of the notes
    for some reader, so none is allowed there."""
    notes = rule(Effect.ALLOW, "uri", rules.pattern("^" + re.escape(f"file://{tree.notes}/")))
    for url in (f"file://{tree.notes}/x?/../../private/secret.txt",
                f"file://{tree.notes}/x#/../../private/secret.txt",
                f"file://{tree.notes}/x\\..\\..\\private\\secret.txt",
                f"file://{tree.notes}/x%5c..%5c..%5cprivate%5csecret.txt",
                f"file://{tree.notes}/out\\secret.txt"):  # fmt: skip
        decided = decide(notes, {"uri": url})
        assert decided.rule is None and decided.doubts, url


@pytest.mark.guarantee("G-RULES-1")
def test_a_path_whose_escapes_or_backslashes_lead_out_of_the_folder_is_not_allowed(
    tree: Tree,
) -> None:
    """A path argument is trimmed, decoded, and ``\\`` read as ``/``, by some servers (Windows
    trims a name's trailing space; Signoff's own reject readings decode): that reading must be in
    the folder too."""
    notes = rule(Effect.ALLOW, "path", rules.under_folder(str(tree.notes)))
    for path in (f"{tree.notes}/%2e%2e/private/secret.txt", f"{tree.notes}/..%2fprivate",
                 f"{tree.notes}/out%2Fsecret.txt", f"{tree.notes}/out\\secret.txt",
                 f"{tree.notes}/a%2f..%2f..%2f.ssh%2fid_rsa", f"{tree.notes}/%2e%2e",
                 f"{tree.notes}/.. ", f"{tree.notes}/..\u00a0"):  # fmt: skip
        assert decide(notes, {"path": path}).rule is None, path
    for path in (f"{tree.notes}/a%20b.md", f"{tree.notes}/sub%2Fb.md", f"{tree.notes}/sub\\b.md"):
        assert decide(notes, {"path": path}).rule == notes, path


@pytest.mark.guarantee("G-RULES-1")
def test_a_recipient_is_read_as_a_mail_server_reads_it() -> None:
    """IDNA maps fullwidth letters to their ASCII and drops a zero-width space: the same
    domain; a quoted local part is the same mailbox."""
    never = rule(Effect.REJECT, "to", rules.one_of([EVIL]))
    team = rule(Effect.ALLOW, "to", rules.one_of(list(TEAM)))
    for to in ("evil@\uff58.com", "evil@x.com\u200b", "Evil <evil@\uff38.COM>", '"evil"@x.com'):
        assert decide(never, {"to": to}).rule == never, to
    for to in ("me@\uff54eam.org", '"me"@team.org'):
        assert decide(team, {"to": to}).rule == team, to
    assert decide(team, {"to": "me@team.org, evil@\uff58.com"}).rule is None


@pytest.mark.guarantee("G-RULES-1")
def test_a_rule_whose_folder_is_written_another_way_holds_for_the_plain_spelling(
    tree: Tree,
) -> None:
    """A pattern that is a fixed start ending in ``/`` is the folder it means: written with
    ``localhost``, in capitals, or through a link (``/tmp`` on macOS), its own plain spelling
    and every other one decide as for the folder."""
    alias, private = tree.root / "alias", tree.private
    secret = f"file://{private}/secret.txt"
    for start in (f"file://localhost{private}/", f"FILE://{private}/", f"file://{alias}/private/"):
        never = rule(Effect.REJECT, "uri", rules.pattern("^" + re.escape(start)))
        assert decide(never, {"uri": secret}).rule == never, start
        assert decide(never, {"uri": f"file://{tree.notes}/a.md"}).rule is None, start
    never = rule(Effect.REJECT, "path", rules.pattern("^" + re.escape(f"{alias}/private/")))
    assert decide(never, {"path": f"{private}/secret.txt"}).rule == never
    notes = rule(Effect.ALLOW, "uri", rules.pattern("^" + re.escape(f"file://{alias}/notes/")))
    for url in (f"file://{alias}/notes/a.md", f"file://{tree.notes}/a.md"):
        assert decide(notes, {"uri": url}).rule == notes, url
    for url in (f"file://{alias}/private/secret.txt", f"file://{alias}/notes/out/secret.txt"):
        assert decide(notes, {"uri": url}).rule is None, url
    docs = rule(Effect.ALLOW, "url", rules.pattern("^https://Docs\\.Example\\.com/api/"))
    for url in ("https://Docs.Example.com/api/x", "https://docs.example.com:443/api/x"):
        assert decide(docs, {"url": url}).rule == docs, url
    assert decide(docs, {"url": "https://docs.example.com/api/%2e%2e/admin"}).rule is None
