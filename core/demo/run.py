"""``signoff demo``: Signoff at work in a few minutes, in a throw-away home.

What it does, in order:

1. makes a fresh home (a temporary directory, 0700; or ``--home DIR``, absent or empty) with a
   notes folder, and sets it up with the same commands a person runs (in-process):
   ``servers add``, ``pin --accept``, ``classify``;
2. starts the tray app (``signoff`` with no arguments) on that home, unless ``--no-app``;
3. plays an agent: an mcp SDK client of a real ``signoff proxy demo`` reads (runs at once),
   writes a note (waits for the person; the script re-calls with the same arguments every
   second for up to ``--wait`` seconds), then deletes a note (destructive: the dialog);
4. prints the record and where the home is, and how to remove it.

``--auto-approve`` decides the approvals itself, through ``core.approvals``, as ``signoff
approve`` would (for tests, and for people without a desktop).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from core import operator_key, paths, private_files
from core.errors import OperatorKeyUnavailable, SignoffError
from core.invocation import frozen, signoff_command, signoff_word
from core.records import ApprovalView, read_approval
from core.store import Store

EXIT_OK, EXIT_FAILED, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

SERVER = "demo"
NOTES_DIR = "notes"
WELCOME_NOTE = "welcome.md"
WELCOME_TEXT = (
    "Welcome to the Signoff demo.\n"
    "An agent may read this note whenever it likes: reading is read_only, and runs at once.\n"
)
OLD_NOTE = "old-draft.md"
OLD_TEXT = "An old draft. The agent will try to delete it; deleting is destructive.\n"
NEW_NOTE = "from-the-agent.md"
NEW_TEXT = "A note from the demo agent. Signoff asked you before it was written.\n"
CLASSES = {
    "list_notes": "read_only",
    "read_note": "read_only",
    "write_note": "local_mutation",
    "delete_note": "destructive",
}
HOLD_SECONDS = 1.0
RECALL_SECONDS = 1.0
APP_START_SECONDS = 2.0
PENDING = re.compile(r"pending as approval (\S+) \(request")
AUTO_BY = "demo:auto-approve"


@dataclass(frozen=True)
class Options:
    app: bool = True
    auto_approve: bool = False
    wait: float = 120.0
    home: Path | None = None


# --- the run ---------------------------------------------------------------------------------


def run(options: Options, out: TextIO | None = None) -> int:
    ui = Out(out or sys.stdout)
    if options.wait <= 0:
        ui.error("--wait takes a number of seconds above 0")
        return EXIT_ERROR
    try:
        home = make_home(options.home)
    except (OSError, ValueError) as e:
        ui.error(str(e))
        return EXIT_ERROR
    ui.title("Signoff demo")
    ui.say(
        "This demo plays an AI agent that uses a small notes server through Signoff. It runs in"
        " a home of its own, so your own Signoff set-up is not touched:"
    )
    ui.say(str(home), indent=2, wrap=False)
    app: subprocess.Popen[bytes] | None = None
    code = EXIT_OK
    try:
        with signoff_home(home):
            configure(home, ui)
            if options.app:
                app = start_app(home, ui)
            code = asyncio.run(Agent(home, options, ui, app is not None).play())
            show_record(ui, keyring=app is not None)
    except KeyboardInterrupt:
        ui.say("")
        ui.say("Stopped (Ctrl+C).")
        code = EXIT_INTERRUPTED
    except Exception as e:  # the demo reports what stopped it, then says where its home is
        ui.say("")
        ui.error(f"the demo stopped: {describe(e)}")
        ui.say(f"The logs are in {home / 'logs'}.", indent=2)
        code = EXIT_ERROR
    finally:
        if app is not None:
            stop_app(app, ui)
        farewell(home, ui, app_ran=app is not None)
    return code


def make_home(chosen: Path | None) -> Path:
    """A fresh home, readable by the user alone: a new temporary directory, or ``chosen``."""
    if chosen is None:
        return Path(tempfile.mkdtemp(prefix="signoff-demo-")).resolve()
    home = chosen.expanduser().resolve()
    if home.exists() and (not home.is_dir() or any(home.iterdir())):
        raise ValueError(f"{home} is not an empty directory; give a new or empty one to --home")
    private_files.make_dir(home, repair=True)
    return home


@contextlib.contextmanager
def signoff_home(home: Path) -> Iterator[None]:
    """SIGNOFF_HOME=home in this process for the duration (the CLI's functions read it)."""
    before = os.environ.get("SIGNOFF_HOME")
    os.environ["SIGNOFF_HOME"] = str(home)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SIGNOFF_HOME", None)
        else:
            os.environ["SIGNOFF_HOME"] = before


def configure(home: Path, ui: Out) -> None:
    notes = home / NOTES_DIR
    notes.mkdir(mode=0o700, exist_ok=True)
    (notes / WELCOME_NOTE).write_text(WELCOME_TEXT, encoding="utf-8")
    (notes / OLD_NOTE).write_text(OLD_TEXT, encoding="utf-8")
    ui.step(
        "Set up the notes server, with the commands you would use for a real one."
        f" Its folder is {notes}."
    )
    server = [*demo_server_command(), str(notes)]
    # The operator key first: the configuration is recorded with it, as decisions are signed.
    with Store.open(paths.database_path()) as store:  # one creator, before anything else
        try:
            operator_key.default().key_for_deciding(store)
        except OperatorKeyUnavailable as e:
            operator_key.choose_mode(store, unauthenticated=True, by="signoff demo",
                                     reason=f"no OS keyring: {e}")  # fmt: skip
            ui.say("No usable OS keyring here: the demo's decisions are not signed (`"
                   f"{signoff_word()} decisions unauthenticated`, in its chain).",
                   indent=2)  # fmt: skip
    signoff_cli(ui, "servers", "add", SERVER, "--", *server)
    signoff_cli(ui, "pin", SERVER, "--accept")
    signoff_cli(ui, "classify", SERVER, *(f"{tool}={side}" for tool, side in CLASSES.items()))
    ui.say(
        "Pinned: a tool whose description changes stops working until you pin it again."
        " Classified: reads are allowed, a write needs your approval, and so does a delete"
        " (with a closer look).",
        indent=2,
    )


def signoff_cli(ui: Out, *argv: str) -> None:
    """Run a ``signoff`` command in this process, show it and what it printed."""
    from core import cli

    ui.command(["signoff", *argv])
    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        code = cli.main(list(argv))
    for line in printed.getvalue().splitlines():
        ui.say(line, indent=6, wrap=False)
    if code != 0:
        raise RuntimeError(f"signoff {' '.join(argv)} failed: {errors.getvalue().strip()}")


# --- the app ---------------------------------------------------------------------------------


def start_app(home: Path, ui: Out) -> subprocess.Popen[bytes] | None:
    ui.step("Start the Signoff app on the demo's home: look for its icon in your tray.")
    logs = home / "logs"
    logs.mkdir(mode=0o700, exist_ok=True)
    console = logs / "app-console.log"
    with console.open("ab") as sink:
        app = subprocess.Popen(  # noqa: S603  # our own command, with a fixed argument list
            signoff_command("app"),
            env={**os.environ, "SIGNOFF_HOME": str(home)},
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )
    try:
        app.wait(APP_START_SECONDS)
    except subprocess.TimeoutExpired:
        ui.say(f"The app runs (process {app.pid}).", indent=2)
        return app
    ui.say(
        f"The app did not start (exit {app.returncode}; see {console}). Perhaps there is no"
        " desktop here. The demo goes on: you decide in the terminal instead.",
        indent=2,
    )
    return None


def stop_app(app: subprocess.Popen[bytes], ui: Out) -> None:
    if app.poll() is not None:
        return
    if sys.stdin.isatty():
        ui.say("")
        with contextlib.suppress(EOFError, KeyboardInterrupt):
            input("Press Enter to close the demo's Signoff app (look around its menu first)... ")
    app.terminate()
    try:
        app.wait(10)
    except subprocess.TimeoutExpired:
        app.kill()
        app.wait(10)
    ui.say("The demo's Signoff app is closed.")


def demo_server_command() -> list[str]:
    """The notes server: a module of this Python, or the bundle's hidden command."""
    if frozen():
        return [str(Path(sys.executable).absolute()), "_demo-server"]
    return [sys.executable, "-m", "core.demo.server"]


# --- the agent -------------------------------------------------------------------------------


class Agent:
    """The scripted agent: an mcp SDK client of ``signoff proxy demo``."""

    def __init__(self, home: Path, options: Options, ui: Out, app: bool) -> None:
        self.home = home
        self.options = options
        self.ui = ui
        self.app = app
        self.session: Any = None

    async def play(self) -> int:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        command = signoff_command("proxy")
        params = StdioServerParameters(
            command=command[0],
            args=[*command[1:], "proxy", SERVER, "--hold", str(HOLD_SECONDS)],
            env={**os.environ, "SIGNOFF_HOME": str(self.home)},
        )
        self.ui.step(
            f"The agent connects. Its MCP host would start `{signoff_word()} proxy demo` in"
            " place of the server; so does this script."
        )
        self.ui.command(["signoff", "proxy", SERVER])
        with private_files.open_log(self.home / "logs" / "host-stderr.log") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                self.session = session
                listed = await session.list_tools()
                names = ", ".join(t.name for t in listed.tools)
                self.ui.say(f"The agent sees these tools: {names}.", indent=2)
                return await self.script()

    async def script(self) -> int:
        ui = self.ui
        ui.step("The agent reads. Reading is read_only: it runs at once, nobody is asked.")
        await self.show_call("list_notes", {})
        await self.show_call("read_note", {"name": WELCOME_NOTE})

        ui.step("The agent writes a note. Writing is a local_mutation: it needs your approval.")
        answer = await self.decided("write_note", {"name": NEW_NOTE, "text": NEW_TEXT})
        if answer is None:
            return EXIT_FAILED
        written = self.home / NOTES_DIR / NEW_NOTE
        if written.exists():
            ui.say(f"The note is in the folder now: {written}", indent=2)

        ui.step(
            f"The agent deletes {OLD_NOTE}. Deleting is destructive: Signoff never approves"
            " it from a notification alone; the dialog shows you the whole request first."
        )
        answer = await self.decided("delete_note", {"name": OLD_NOTE}, destructive=True)
        if answer is None:
            return EXIT_FAILED
        if (self.home / NOTES_DIR / OLD_NOTE).exists():
            ui.say(f"{OLD_NOTE} is still in the folder.", indent=2)
        return EXIT_OK

    async def call(self, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        import mcp_types as types

        result = await self.session.call_tool(tool, arguments)
        if not isinstance(result, types.CallToolResult):
            return f"(an unexpected answer: {type(result).__name__})", True
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        return text, bool(result.is_error)

    async def show_call(self, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        self.ui.call(tool, arguments)
        text, error = await self.call(tool, arguments)
        self.ui.answer(text, error)
        return text, error

    async def decided(
        self, tool: str, arguments: dict[str, Any], *, destructive: bool = False
    ) -> str | None:
        """Call until the call is no longer pending; its answer, or None when time ran out."""
        ui = self.ui
        text, error = await self.show_call(tool, arguments)
        match = PENDING.search(text)
        if match is None:
            return text  # decided at once (a policy of yours allowed or denied it)
        approval = self.approval(match.group(1))
        self.explain(approval, destructive)
        if self.options.auto_approve:
            self.auto_approve(approval)
        ui.say(
            f"The agent asks again with the same arguments every second, for up to"
            f" {self.options.wait:g} s...",
            indent=2,
        )
        deadline = time.monotonic() + self.options.wait
        reported = last = time.monotonic()
        while PENDING.search(text):
            now = time.monotonic()
            if now >= deadline:
                ui.say("")
                ui.say(
                    f"No decision within {self.options.wait:g} s; the demo stops here. The"
                    f" request is still pending as approval {approval.id}: you can still"
                    " decide it, and an agent calling again would collect the answer.",
                    indent=2,
                )
                return None
            if now - reported >= 15:
                ui.say(f"still waiting ({deadline - now:.0f} s left)...", indent=4)
                reported = now
            await asyncio.sleep(max(0.0, RECALL_SECONDS - (time.monotonic() - last)))
            last = time.monotonic()
            text, error = await self.call(tool, arguments)
        decided = self.approval(approval.id)
        by = f" by {decided.decided_by}" if decided.decided_by else ""
        if decided.status == "rejected":
            ui.say(f"Rejected{by}: the call did not run. The agent was told:", indent=2)
        else:
            ui.say(f"Approved{by}: the call ran, once. The agent got:", indent=2)
        ui.answer(text, error)
        return text

    def approval(self, approval_id: str) -> ApprovalView:
        with (
            Store.open(paths.database_path(), create=False) as store,
            store.snapshot() as conn,
        ):
            approval = read_approval(conn, approval_id)
        if approval is None:
            raise RuntimeError(f"the proxy named approval {approval_id}, which is not recorded")
        return approval

    def explain(self, approval: ApprovalView, destructive: bool) -> None:
        ui = self.ui
        h = approval.request_hash
        ui.say(
            f"Signoff holds the call: it has not run. It waits as approval {approval.id};"
            f" the request's fingerprint is {h[:4]} {h[4:8]} {h[8:12]} {h[12:16]} (the app"
            " shows the same).",
            indent=2,
        )
        if self.options.auto_approve:
            return
        ui.say("Your turn. Any one of these decides it:", indent=2)
        if self.app:
            if destructive:
                ui.say(
                    "- the Signoff notification: click it (or the tray icon's menu) to open"
                    " the dialog, read the request, then Approve or Reject",
                    indent=4,
                )
            else:
                ui.say("- the Signoff notification: click Approve (or Reject)", indent=4)
                ui.say(
                    "- the Signoff dialog: click the notification, or the request in the"
                    " tray icon's menu",
                    indent=4,
                )
        home = f"SIGNOFF_HOME={shlex.quote(str(self.home))}"
        word = signoff_word()
        ui.say("- another terminal:", indent=4)
        ui.say(f"{home} {word} approve {approval.id}", indent=8, wrap=False)
        ui.say("- or say no, to see what the agent is told then:", indent=4)
        ui.say(f'{home} {word} reject {approval.id} --reason "not now"', indent=8, wrap=False)

    def auto_approve(self, approval: ApprovalView) -> None:
        from core.approvals import approve

        with Store.open(paths.database_path(), create=False) as store:
            approve(
                store,
                approval.run_id,
                approval.id,
                AUTO_BY,
                "signoff demo --auto-approve",
                expected_hash=approval.request_hash,
            )
        self.ui.say(
            f"--auto-approve: the demo approves {approval.id} itself, through core.approvals,"
            f" as `{signoff_word()} approve` would.",
            indent=2,
        )


# --- the end ---------------------------------------------------------------------------------


def show_record(ui: Out, *, keyring: bool) -> None:
    ui.step("What Signoff recorded: one run per call, and a hash-chained log of every event.")
    signoff_cli(ui, "runs")
    signoff_cli(ui, "verify", *(() if keyring else ("--no-keyring",)))


def farewell(home: Path, ui: Out, *, app_ran: bool) -> None:
    quoted = shlex.quote(str(home))
    ui.say("")
    ui.say("The demo's home (configuration, database, logs and the notes folder) stays at:")
    ui.say(str(home), indent=2, wrap=False)
    ui.say("Look around with, for example:")
    ui.say(f"SIGNOFF_HOME={quoted} {signoff_word()} runs", indent=2, wrap=False)
    ui.say("Remove it when you are done:")
    ui.say(f"rm -rf {quoted}", indent=2, wrap=False)
    kept = kept_entries(home / paths.DATABASE_NAME) if app_ran else []
    if kept:
        ui.say("The app also kept the demo chain's head in your OS keyring; remove it with:")
        for key in kept:
            ui.say(keyring_removal(shlex.quote(key)), indent=2, wrap=False)


def keyring_removal(key: str) -> str:
    """The command that removes the demo's head (``key``, quoted) from the OS keyring."""
    if not frozen():
        return f"{shlex.quote(sys.executable)} -m keyring del signoff {key}"
    if sys.platform == "darwin":
        return f"security delete-generic-password -s signoff -a {key}"
    if sys.platform == "win32":
        return f"(Windows Credential Manager: the generic credential signoff, user {key})"
    return f"secret-tool clear service signoff username {key}"  # libsecret-tools


def kept_entries(database: Path) -> list[str]:
    """The keyring entries the app kept for the demo's database: its head, by the database's
    id, and the place it lies at (core/heads.py); none when the keyring cannot say."""
    from core.heads import KeyringHeadStore, head_key, place_key, places
    from core.store import Store

    heads = KeyringHeadStore()
    try:
        with Store.open(database, create=False, readonly=True) as store:
            database_id = store.database_id
        found = [head_key(database_id)] if heads.load(database_id) is not None else []
        return found + [place_key(p) for p in places(database) if heads.placed(p) is not None]
    except SignoffError:
        return []


def describe(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
        return describe(e.exceptions[0])
    if isinstance(e, SignoffError):
        return f"{e} [{type(e).__name__}]"
    return str(e) or type(e).__name__


class Out:
    """Friendly, numbered output, flushed as it goes (the person watches it live)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.number = 0

    def say(self, text: str, *, indent: int = 0, wrap: bool = True) -> None:
        pad = " " * indent
        lines = text.splitlines() or [""]
        if wrap:
            width = max(60, min(100, shutil.get_terminal_size().columns - 1))
            more = pad + "  " if text.startswith("- ") else pad
            lines = [
                part
                for line in lines
                for part in textwrap.wrap(
                    line, width, initial_indent=pad, subsequent_indent=more,
                    break_long_words=False, break_on_hyphens=False,
                ) or [""]
            ]  # fmt: skip
        else:
            lines = [pad + line for line in lines]
        self.stream.write("".join(f"{line}\n" for line in lines))
        self.stream.flush()

    def error(self, text: str) -> None:
        self.stream.flush()
        print(f"signoff demo: {text}", file=sys.stderr, flush=True)

    def title(self, text: str) -> None:
        self.say(text)
        self.say("=" * len(text))

    def step(self, text: str) -> None:
        self.number += 1
        self.say("")
        self.say(f"Step {self.number}. {text}")

    def command(self, argv: list[str]) -> None:
        """A ``signoff ...`` command, shown as a person would type it here."""
        words = [signoff_word(), *(shlex.quote(a) for a in argv[1:])]
        self.say("$ " + " ".join(words), indent=2, wrap=False)

    def call(self, tool: str, arguments: dict[str, Any]) -> None:
        shown = ", ".join(f"{k}={_short(v)}" for k, v in arguments.items())
        self.say(f"agent > {tool}({shown})", indent=2, wrap=False)

    def answer(self, text: str, error: bool) -> None:
        self.say(("error: " if error else "") + text, indent=6, wrap=False)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"
