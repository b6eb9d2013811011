"""A host's remote (URL) servers imported as Signoff's remote servers (core/host_remote.py):
their URL and headers, never a secret written into Signoff's configuration: one the host wrote
out (in a header or in the URL's query) moved to the OS keyring at import, one it only names
said by name; SSE and plain-http entries skipped with the reason; not
wired. Real files, the real configuration editor, and the installed command."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.hosts import (
    Action,
    Host,
    HostConfigError,
    apply_import,
    plan_import,
    plan_wire,
    read_host,
    signoff_command,
)
from core.proxy.config import Config, load
from core.proxy.remote import keyring_secret, store_secret
from tests.conftest import _secret_service_problem, need, run_signoff
from tests.core.test_hosts import actions, write

SECRET = "tk_not-a-real-token"  # noqa: S105  # a fake token, to see it is never copied

CURSOR = {
    "mcpServers": {
        "tickets": {"url": "https://mcp.example.com/mcp",
                    "headers": {"Authorization": f"Bearer {SECRET}"}},
        "docs": {"type": "http", "url": "https://docs.example.com/mcp",
                 "headers": {"Authorization": "Bearer ${env:DOCS_TOKEN}", "X-Team": "blue"}},
        "asked": {"type": "http", "url": "https://asked.example.com/mcp",
                  "headers": {"X-Api-Key": "${input:api-key}"}},
        "legacy": {"type": "sse", "url": "https://old.example.com/sse"},
        "clear": {"url": "http://example.com/mcp"},
        "local": {"url": "http://127.0.0.1:8931/mcp"},
        "keyed": {"url": f"https://keyed.example.com/mcp?team=blue&apiKey={SECRET}"
                         "&token=${env:KEYED_TOKEN}&sig=${input:sig}"},
    }
}  # fmt: skip


@pytest.mark.guarantee("G-REMOTE-1")
def test_remote_entries_are_planned_by_url_and_what_cannot_be_taken_is_skipped_with_why(
    tmp_path: Path,
) -> None:
    items = plan_import(read_host(write(tmp_path / "mcp.json", CURSOR), Host.CURSOR), Config())
    assert actions(items) == {
        "tickets": (Action.IMPORT, "tickets"),
        "docs": (Action.IMPORT, "docs"),
        "asked": (Action.IMPORT, "asked"),
        "legacy": (Action.SKIPPED, ""),
        "clear": (Action.SKIPPED, ""),
        "local": (Action.IMPORT, "local"),
        "keyed": (Action.IMPORT, "keyed"),
    }
    said = {item.key: item.reason for item in items}
    assert "moved to the OS keyring as secret tickets-authorization" in said["tickets"]
    assert "URL's apiKey is moved to the OS keyring as secret keyed-apikey" in said["keyed"]
    assert "URL's token reads KEYED_TOKEN from the proxy's environment" in said["keyed"]
    assert "signoff secret set keyed-sig" in said["keyed"]
    assert "reads DOCS_TOKEN from the proxy's environment" in said["docs"]
    assert "signoff secret set asked-x-api-key" in said["asked"]  # VS Code's ${input:...}
    assert "Streamable HTTP only" in said["legacy"]
    assert "plain http is allowed to this computer only" in said["clear"]
    assert all(SECRET not in reason for reason in said.values())
    assert all(SECRET not in item.url + repr(item.headers) for item in items)


@pytest.mark.guarantee("G-REMOTE-1")
def test_importing_writes_the_url_and_references_never_the_secret_and_is_then_known(
    tmp_path: Path, home: Path
) -> None:
    config_path = home / "config.toml"
    hostfile = read_host(write(tmp_path / "mcp.json", CURSOR), Host.CURSOR)
    items = plan_import(hostfile, Config())
    problem = _secret_service_problem()
    need(problem is None, problem or "")
    for name in ("tickets-authorization", "keyed-apikey"):  # the keyring is shared across tests
        store_secret(name, "stale: kept before this import")
    assert apply_import(config_path, items, ["tickets", "docs", "local", "keyed"]) == [
        "tickets", "docs", "local", "keyed"
    ]  # fmt: skip
    config = load(config_path)
    tickets, docs = config.servers["tickets"], config.servers["docs"]
    assert (tickets.url, tickets.command) == ("https://mcp.example.com/mcp", "")
    assert dict(tickets.headers) == {"Authorization": "${keyring:tickets-authorization}"}
    assert dict(docs.headers) == {"Authorization": "Bearer ${DOCS_TOKEN}", "X-Team": "blue"}
    assert config.servers["keyed"].url == (
        "https://keyed.example.com/mcp?team=blue&apiKey=${keyring:keyed-apikey}"
        "&token=${KEYED_TOKEN}&sig=${keyring:keyed-sig}"
    )
    assert SECRET not in config_path.read_text()
    # Moved, not lost: the keyring holds what the host wrote, as `signoff secret set` keeps it.
    assert keyring_secret("tickets-authorization") == f"Bearer {SECRET}"
    assert keyring_secret("keyed-apikey") == SECRET
    again = plan_import(hostfile, config)  # the same URL: already imported
    assert actions(again)["tickets"] == (Action.IMPORTED, "tickets")


def test_a_remote_entry_is_not_wired(tmp_path: Path, home: Path) -> None:
    hostfile = read_host(write(tmp_path / "mcp.json", CURSOR), Host.CURSOR)
    with pytest.raises(HostConfigError, match="imported, not wired"):
        plan_wire(hostfile, ["tickets"], signoff_command(), config=Config())


@pytest.mark.guarantee("G-REMOTE-1")
def test_the_command_imports_remote_servers_and_says_which_secret_it_moved(
    tmp_path: Path, home: Path
) -> None:
    path = write(tmp_path / "mcp.json", CURSOR)
    done = run_signoff("hosts", "import", "cursor", "--file", str(path), home=home)
    assert done.returncode == 0, done.stderr
    assert "tickets: import:" in done.stdout and "legacy: skipped:" in done.stdout
    assert "moved to the OS keyring as secret tickets-authorization" in done.stdout
    assert SECRET not in done.stdout + done.stderr
    assert {"tickets", "docs", "asked", "local"} <= set(load(home / "config.toml").servers)
    assert SECRET not in (home / "config.toml").read_text()


def test_a_remote_entry_renamed_for_a_clash_names_its_secret_after_its_own_name(
    tmp_path: Path, home: Path
) -> None:
    from core.proxy.manage import add_server

    config_path = home / "config.toml"
    add_server(config_path, "tickets-x", "npx", ["other"])
    hostfile = {"mcpServers": {"tickets x": CURSOR["mcpServers"]["tickets"]}}
    items = plan_import(read_host(write(tmp_path / "mcp.json", hostfile), Host.CURSOR),
                        load(config_path))  # fmt: skip
    assert actions(items) == {"tickets x": (Action.IMPORT, "tickets-x-2")}
    assert "keyring as secret tickets-x-2-authorization" in items[0].reason
    apply_import(config_path, items, ["tickets x"])
    headers = dict(load(config_path).servers["tickets-x-2"].headers)
    assert headers == {"Authorization": "${keyring:tickets-x-2-authorization}"}
