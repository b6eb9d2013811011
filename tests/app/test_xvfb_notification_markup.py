"""What a person reads on a real notification, whatever the model wrote in the arguments.

The model chooses a call's arguments, and xfce4-notifyd, which advertises ``body-markup``, reads
a body as markup. Sent unescaped, the arguments wrote the prompt (the issue "The prompt cannot
lie"): a ``to`` of ``mallory@evil.io</span>`` beside a ``body`` of entities read as
``"to":"bob@example.com"``; a line separator and ``<b>`` drew a fake request line and a bold
"Signoff: checked, safe to approve"; an ``<img>`` blanked the body; an ``<a href>`` became a
link; a long value pushed the decisive one out of a cut summary.

Here each request is a real call through ``signoff proxy`` (the mcp SDK's client in front of a
fake server, tests/proxy/fake_server.py), left pending; the installed ``signoff`` app notifies;
the real xfce4-notifyd draws it on Xvfb (the desktop of tests/app/test_xvfb_desktop.py); and the
test reads back what the daemon drew, checked against the request as stored:

1. Markup the model wrote is drawn as text: the real recipient literally, ``<img`` and
   ``<a href`` literally; the body is never blank and holds no link.
2. The summary is ``Approve SERVER/TOOL?``; the first two drawn lines are Signoff's own,
   ``CLASS`` then ``fingerprint XXXX XXXX XXXX XXXX``, for this request's class and request
   hash; no other line contains them. Every other line is one argument's ``key: value`` (or
   the count of those left out), so nothing the model wrote starts a line: nor a row as
   wrapped on the screen.
3. For each top-level argument, Approve is not offered or ``key: <its JSON>`` is drawn
   exactly; an argument that fits is drawn whole even after a long one; a cut one says how
   many characters are missing, truly.
4. Approve and Reject are offered exactly when core.present shows every argument whole and
   nothing marked, and the request is not destructive (Review… otherwise); when they are, the
   whole body is on the screen. The drawn lines are core.present's lines.

How the drawn text is read. xfce4-notifyd 0.7.3 (Debian 12; read from its source and its
binary) sets a body by checking that it is well-formed XML (GMarkup, inside ``<markup>``), then
``gtk_label_set_markup`` (GTK's own pass for ``<a href>``, then Pango's markup), and otherwise
``gtk_label_set_text`` with the body as it is. When Pango refuses what GMarkup accepted (an
unknown element such as ``<img src='x'/>``), GTK only warns and the label stays empty: the
blank body. Its body label is at most (screen width in pixels / 30) characters wide, 42 here,
and wraps; it is not cut (its six-line limit only bounds the label's smallest height: a body of
28 rows is drawn whole), so the window grows with the text. The ways to read what it drew:

(a) capture the Notify call on the bus and render its body with Debian's Pango or GTK (python3-gi
    in a subprocess): faithful only while a copy of the daemon's rules (the GMarkup check, the
    link pass, the fallbacks) stays true to the daemon, which is a second implementation of the
    thing tested;
(b) the daemon's own notification log: off unless its settings turn it on, and it keeps what
    the daemon received, not what it drew;
(c) the daemon's own label, read over the accessibility bus (AT-SPI): its text after the
    daemon's own markup handling, the links GTK made, the buttons drawn, and where each
    character is drawn (so wrapped rows and the screen's edge show). It costs at-spi2-core and
    Debian's python3-gi with gir1.2-atspi-2.0, run by tests/app/read_notifications.py under
    /usr/bin/python3 (the venv has no gi); once the daemon is up a reading takes about 0.2 s.

(c) is used: it reads the real daemon and leaves nothing to imitate. The Notify call is still
recorded (dbus-monitor on the desktop's bus) so that a failure shows what the app sent beside
what was drawn.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.model import meaning
from app.words import WORDS, class_words
from core import marks, present
from core.records import PendingRequest, pending_requests
from tests.app.test_xvfb_desktop import (
    SCREEN,
    Desktop,
    no_traceback,
    require_desktop_tools,
    start_app,
    wait_for,
)
from tests.conftest import need
from tests.host import text
from tests.proxy.rig import Rig

pytestmark = pytest.mark.slow

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, with python3-gi
READER = Path(__file__).with_name("read_notifications.py")
PACKAGES = "scripts/system-packages.sh installs it"
SERVER = "mail"
# Properties in the order sorted keys put them: the decisive argument after the long one.
TOOLS = [
    {"name": "send_email", "description": "Send an email",
     "inputSchema": {"type": "object", "properties": {
         "body": {"type": "string"}, "subject": {"type": "string"}, "to": {"type": "string"}}}},
    {"name": "write_file", "description": "Write a file",
     "inputSchema": {"type": "object", "properties": {
         "content": {"type": "string"}, "path": {"type": "string"}}}},
    {"name": "write_note", "description": "Append a line to the notes",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
]  # fmt: skip
CLASSES = {"send_email": "remote_mutation", "write_file": "local_mutation",
           "write_note": "local_mutation"}  # fmt: skip
SCHEMAS = {tool["name"]: tool["inputSchema"] for tool in TOOLS}
WIDTH, HEIGHT = (int(n) for n in SCREEN.split("x")[:2])
# Where Pango starts a new line: paragraph separators and UAX #14's mandatory breaks.
LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x85\u2028\u2029]")
# Signoff's own words at the start of a line: what a forged line of Signoff's would begin with.
OWN_WORDS = re.compile(  # Signoff's first line names the class in words (app/words.py)
    rf"\s*(Signoff\b|request\b|fingerprint\b|({'|'.join(present.CLASS_WORDS)})\b"
    rf"|({'|'.join(WORDS.values())})\b)"
)
CUT = re.compile(r"(?P<kept>.*)… \(\+(?P<missing>\d+) characters\)")
MORE = re.compile(r"\(\+\d+ more arguments\)")


# --- the requests --------------------------------------------------------------------------


@dataclass(frozen=True)
class Payload:
    tool: str
    arguments: dict[str, Any]
    literal: tuple[str, ...] = ()  # must be drawn as written
    never: tuple[str, ...] = ()  # patterns that must not be drawn
    decisive: str | None = None  # the short argument that must be drawn whole, always


LONG = "Dear team, please find the figures attached. " * 14  # 630 characters
# Read as markup, these entities close the body's string and write a second "to".
ENTITIES = "Hi&#34;,&#34;to&#34;:&#34;bob@example.com<span size='1'>"
# Line separators, and lines in the words of Signoff's own first line (old and new).
FORGED = (
    "Hi\u2028<b>Signoff: checked, safe to approve</b>\u2028request 1ab4 6bf0 9c2e 77d1"
    "\u2028remote_mutation · request hash 1ab4 6bf0 9c2e 77d1\u2028fingerprint 1ab4 6bf0 9c2e 77d1"
    "\u2028Changes things elsewhere\u2028fingerprint 1ab4 6bf0 9c2e 77d1"
)
PAYLOADS = {
    "span-closes-to-and-entities-forge-bob": Payload(
        "send_email",
        {"to": "mallory@evil.io</span>", "subject": "x", "body": ENTITIES},
        literal=("mallory@evil.io</span>",),
        never=(r"""(^|[{,\s])"?to"?\s*:\s*"?bob@example\.com""",),
        decisive="to",
    ),
    "line-separators-and-bold-forge-signoff-lines": Payload(
        "send_email",
        {"to": "bob@example.com", "subject": "Quarterly report", "body": FORGED},
        decisive="to",
    ),
    "img-as-written": Payload("write_note", {"text": 'see <img src="x">'}, literal=("<img",)),
    "img-self-closed-blanks-a-markup-body": Payload(
        "write_note", {"text": "see <img src='x'/>"}, literal=("<img",)
    ),
    "link-as-written": Payload(
        "write_note",
        {"text": '<a href="https://evil.example">click</a>'},
        literal=("<a href",),
    ),
    "link-in-single-quotes-is-well-formed-markup": Payload(
        "write_note",
        {"text": "<a href='https://evil.example'>click</a>"},
        literal=("<a href",),
    ),
    "long-body-before-the-recipient": Payload(
        "send_email",
        {"to": "mallory@evil.io", "subject": "Invoice", "body": LONG[:600]},
        literal=("mallory@evil.io",),
        decisive="to",
    ),
    "long-content-before-a-climbing-path": Payload(
        "write_file",
        {"path": "notes/../../../../home/me/.bashrc", "content": LONG[:600]},
        literal=("notes/../../../../home/me/.bashrc",),
        decisive="path",
    ),
}


def make_pending(rig: Rig, tool: str, arguments: dict[str, Any]) -> PendingRequest:
    """A real call through ``signoff proxy``, held briefly: it stays pending for the operator."""

    async def call() -> str:
        async with rig.client(SERVER, hold=0.2) as host:
            return text(await host.call_tool(tool, arguments))

    answer = anyio.run(call)
    assert "pending" in answer, answer
    with rig.store() as store, store.snapshot() as conn:
        [waiting] = pending_requests(conn)
    return waiting


# --- what the daemon drew ------------------------------------------------------------------


@dataclass(frozen=True)
class Drawn:
    """A notification as xfce4-notifyd drew it (tests/app/read_notifications.py)."""

    summary: str
    body: str
    rows: list[dict[str, Any]]  # the body's rows on the screen: top, offset, text
    links: list[dict[str, str]]
    buttons: list[str]
    box: list[int]  # the body label's x, y, width, height on the screen
    received: str = field(default="", compare=False)  # the Notify call, as dbus-monitor shows it

    @property
    def lines(self) -> list[str]:
        return LINE_BREAK.split(self.body)

    def report(self) -> str:
        body = "\n".join(f"    | {line!r}" for line in self.lines)
        return (
            f"xfce4-notifyd drew:\n  summary: {self.summary!r}\n  body:\n{body}\n"
            f"  buttons: {self.buttons}\n  links: {self.links}\n  body box: {self.box}\n"
            f"the Notify call it received:\n{self.received or '  (none recorded)'}"
        )


def read_drawn(desktop: Desktop) -> list[dict[str, Any]]:
    done = subprocess.run(
        [SYSTEM_PYTHON, str(READER)],
        env=desktop.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{READER.name} failed: {done.stderr}"
    return list(json.loads(done.stdout))


def approval_drawn(desktop: Desktop) -> Drawn | None:
    for window in read_drawn(desktop):
        labels = [label for label in window["labels"] if label["showing"]]
        if labels and labels[0]["text"].startswith("Approve "):
            summary, *rest = labels
            body = rest[0] if rest else {"text": "", "rows": [], "links": [], "box": []}
            return Drawn(
                summary["text"],
                body["text"],
                body["rows"],
                [link for label in labels for link in label["links"]],
                window["buttons"],
                body["box"],
                notify_calls(desktop),
            )
    return None


def watch_notify_calls(desktop: Desktop) -> None:
    """dbus-monitor on the desktop's bus, recording every Notify call (logs/notify-calls.log)."""
    rule = "type='method_call',interface='org.freedesktop.Notifications',member='Notify'"
    desktop.spawn("notify-calls", ["dbus-monitor", "--address", desktop.bus, rule])
    # A monitor's own name is taken away once it becomes a monitor: from then on it records.
    wait_for(lambda: "member=NameLost" in desktop.log("notify-calls"), "dbus-monitor watching")


def notify_calls(desktop: Desktop) -> str:
    logged = desktop.log("notify-calls")
    calls = logged.split("method call ")[1:]
    return "".join(f"  method call {call}" for call in calls)


def wait_for_approval(desktop: Desktop, home: Path) -> Drawn:
    try:
        return wait_for(lambda: approval_drawn(desktop), "xfce4-notifyd drawing the approval")
    except AssertionError as e:
        logs = "\n".join(
            f"--- {name}:\n{text[-4000:]}"
            for name, text in (
                ("the app's stderr", desktop.log("app")),
                ("logs/app.log", _read(home / "logs" / "app.log")),
                ("xfce4-notifyd", desktop.log("notifyd")),
                ("Notify calls", notify_calls(desktop) or "(none)"),
            )
        )
        raise AssertionError(f"{e}\n{logs}") from None


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


# --- what it must say ----------------------------------------------------------------------


def json_text(value: Any) -> str:
    """A value as core.present shows it: its JSON text on one line."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def problems_with(drawn: Drawn, request: PendingRequest, payload: Payload) -> list[str]:
    """Every way the drawn notification misleads about ``request`` (the module's rules)."""
    found: list[str] = []
    arguments = payload.arguments
    lines = drawn.lines
    body_text = "\n".join(lines)
    offered = "Approve" in drawn.buttons

    # 1. Markup drawn as text.
    for written in payload.literal:
        if written not in drawn.body:
            found.append(f"{written!r} is not drawn as written")
    for pattern in payload.never:
        if re.search(pattern, body_text, flags=re.M):
            found.append(f"drawn: {pattern!r}")
    if len(drawn.body.strip()) == 0:
        found.append("the body is blank")
    if drawn.links:
        found.append(f"the notification holds links: {drawn.links}")

    # 2. Signoff's line first, then one line per argument.
    head = [
        class_words(request.side_effect),
        f"fingerprint {present.fingerprint(request.request_hash)}",
    ]
    title = f"Approve {SERVER}/{payload.tool}?"
    if drawn.summary != title:
        found.append(f"the summary is {drawn.summary!r}, not {title!r}")
    if lines[:2] != head:
        found.append(f"the first lines are {lines[:2]!r}, not Signoff's {head!r}")
    meant = [f"→ {meaning(r)}" for r in request.read]  # what values mean (app/notifier.py)
    for line in lines[2:]:
        if head[1] in line:
            found.append(f"Signoff's line is drawn again: {line!r}")
        argument = any(line.startswith(f"{key}: ") for key in arguments) or MORE.fullmatch(line)
        if not argument and line not in meant:
            found.append(f"a line is neither an argument's nor a meaning: {line!r}")
    after_head = len(lines[0]) + 1 + len(lines[1])
    for row in drawn.rows:
        if row["offset"] > after_head and OWN_WORDS.match(row["text"]):
            found.append(f"a row on the screen starts with Signoff's words: {row['text']!r}")

    # 3. Each argument: whole, or Approve is not offered; cut only truly.
    for key, value in arguments.items():
        whole = f"{key}: {json_text(value)}"
        if offered and whole not in lines:
            found.append(f"Approve is offered but {whole!r} is not drawn")
        if key == payload.decisive and whole not in lines:
            found.append(f"the decisive {whole!r} is not drawn whole")
        shown = marks.visible(json_text(value), lines=False)
        mine = [line[len(key) + 2 :] for line in lines[2:] if line.startswith(f"{key}: ")]
        for drawn_value in mine:
            cut = CUT.fullmatch(drawn_value)
            honest = drawn_value == shown or (
                cut is not None
                and shown.startswith(cut["kept"])
                and len(shown) - len(cut["kept"]) == int(cut["missing"])
            )
            if not honest:
                found.append(f"{key} is drawn as {drawn_value!r}, which is not {shown!r}")

    # 4. The buttons and the lines of core.present.
    view = present.view(request.arguments, SCHEMAS[payload.tool])
    review = request.side_effect == "destructive" or not view.whole() or bool(request.read)
    expected = ["Review…"] if review else ["Approve", "Reject"]
    if drawn.buttons != expected:
        found.append(f"the buttons are {drawn.buttons}, not {expected} (whole: {view.whole()})")
    if offered:
        x, y, w, h = drawn.box
        if x < 0 or y < 0 or x + w > WIDTH or y + h > HEIGHT:
            found.append(f"the body {drawn.box} is not all on the {WIDTH}x{HEIGHT} screen")
    wanted = [line.text for line in view.lines()]
    if lines[2:] != wanted + meant:
        found.append(f"the lines are not core.present's, then the meanings: {wanted + meant}")
    return found


# --- the tests -----------------------------------------------------------------------------


def _reader_problem() -> str | None:
    if not os.path.exists(SYSTEM_PYTHON):
        return f"no {SYSTEM_PYTHON} to read the daemon's window with"
    probe = "import gi; gi.require_version('Atspi', '2.0'); from gi.repository import Atspi"
    done = subprocess.run(
        [SYSTEM_PYTHON, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        return f"python3-gi or gir1.2-atspi-2.0 is not installed ({PACKAGES})"
    return None


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[Desktop]:
    require_desktop_tools()
    need(shutil.which("dbus-monitor") is not None, f"dbus-monitor is not installed ({PACKAGES})")
    launchers = ("/usr/libexec/at-spi-bus-launcher", "/usr/lib/at-spi2-core/at-spi-bus-launcher")
    need(any(map(os.path.exists, launchers)), f"at-spi2-core is not installed ({PACKAGES})")
    problem = _reader_problem()
    need(problem is None, problem or "")
    with Desktop(tmp_path / "desktop") as d:
        d.start(accessible=True)
        watch_notify_calls(d)
        yield d


def mail_rig(home: Path, tool: str) -> Rig:
    """The fake mail server listing ``tool`` alone, pinned and classified: each ``signoff``
    command costs seconds, so only what the test calls is set up."""
    rig = Rig(home)
    rig.add_fake(SERVER, [t for t in TOOLS if t["name"] == tool])
    rig.signoff("pin", SERVER, "--accept")
    rig.classify(SERVER, **{tool: CLASSES[tool]})
    return rig


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_a_hostile_request_is_drawn_as_it_is_and_offers_approve_only_when_shown_whole(
    name: str, desktop: Desktop, home: Path
) -> None:
    payload = PAYLOADS[name]
    rig = mail_rig(home, payload.tool)
    start_app(desktop, home)
    request = make_pending(rig, payload.tool, payload.arguments)

    drawn = wait_for_approval(desktop, home)

    problems = problems_with(drawn, request, payload)
    assert not problems, "\n".join(["the notification misleads:", *problems, drawn.report()])
    no_traceback(desktop, home)


def test_a_short_harmless_request_is_drawn_whole_with_approve_and_reject(
    desktop: Desktop, home: Path
) -> None:
    payload = Payload("write_note", {"text": "hello"}, literal=('text: "hello"',))
    rig = mail_rig(home, payload.tool)
    start_app(desktop, home)
    request = make_pending(rig, payload.tool, payload.arguments)

    drawn = wait_for_approval(desktop, home)

    assert drawn.buttons == ["Approve", "Reject"], drawn.report()
    assert drawn.lines[2:] == ['text: "hello"'], drawn.report()
    problems = problems_with(drawn, request, payload)
    assert not problems, "\n".join(["the notification misleads:", *problems, drawn.report()])
    no_traceback(desktop, home)
