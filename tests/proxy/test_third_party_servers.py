"""Smoke tests: the real third-party MCP servers and the MCP Inspector CLI that
scripts/mcp-servers.sh installs start here and answer over stdio (no Signoff code involved).

Tools each server lists to the mcp SDK's plain ClientSession (no roots/sampling/elicitation):
  server-filesystem 2026.8.31: read_file, read_text_file, read_media_file, read_multiple_files,
    write_file, edit_file, create_directory, list_directory, list_directory_with_sizes,
    directory_tree, move_file, search_files, get_file_info, list_allowed_directories
  server-memory 2026.8.31: create_entities, create_relations, add_observations,
    delete_entities, delete_observations, delete_relations, read_graph, search_nodes,
    open_nodes
  server-everything 2026.8.31: echo, get-annotated-message, get-env, get-resource-links,
    get-resource-reference, get-structured-content, get-sum, get-tiny-image,
    gzip-file-as-resource, toggle-simulated-logging, toggle-subscriber-updates,
    trigger-long-running-operation, simulate-research-query (registered after initialize;
    more tools appear for clients that declare roots, sampling or elicitation)
  mcp-server-time 2026.10.19: get_current_time, convert_time
  mcp-server-git 2026.10.19: git_status, git_diff_unstaged, git_diff_staged, git_diff,
    git_commit, git_add, git_reset, git_log, git_create_branch, git_checkout, git_show,
    git_branch
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.mcp_servers import (
    ServerCommand,
    everything_server,
    filesystem_server,
    git_server,
    inspector_cli,
    memory_server,
    time_server,
)

TIMEOUT = 60


def list_and_call(
    server: ServerCommand, tool: str, arguments: dict[str, Any], log: Path
) -> tuple[list[types.Tool], types.CallToolResult]:
    """Start the server, initialize, list its tools, call one; the server's stderr goes to log."""

    async def session() -> tuple[list[types.Tool], types.CallToolResult]:
        params = StdioServerParameters(
            command=server.command, args=server.args, env=server.env_extra
        )
        with anyio.fail_after(TIMEOUT), log.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                tools = await s.list_tools()
                result = await s.call_tool(tool, arguments)
        assert isinstance(result, types.CallToolResult), result
        return tools.tools, result

    return anyio.run(session)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def names(tools: list[types.Tool]) -> set[str]:
    return {t.name for t in tools}


def test_filesystem_server_lists_a_directory(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "hello.txt").write_text("hi\n")
    (shared / "sub").mkdir()
    server = filesystem_server(shared)

    tools, result = list_and_call(
        server, "list_directory", {"path": str(shared.resolve())}, tmp_path / "stderr"
    )

    assert {"list_directory", "read_text_file", "write_file", "move_file"} <= names(tools)
    assert not result.is_error, text_of(result)
    assert "[FILE] hello.txt" in text_of(result)
    assert "[DIR] sub" in text_of(result)


def test_memory_server_reads_its_graph(tmp_path: Path) -> None:
    memory_file = tmp_path / "memory.jsonl"
    entity = {"type": "entity", "name": "signoff", "entityType": "project", "observations": []}
    memory_file.write_text(json.dumps(entity) + "\n")

    tools, result = list_and_call(memory_server(memory_file), "read_graph", {}, tmp_path / "log")

    assert {"read_graph", "create_entities", "delete_entities"} <= names(tools)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert [e["name"] for e in result.structured_content["entities"]] == ["signoff"]


def test_everything_server_echoes(tmp_path: Path) -> None:
    tools, result = list_and_call(
        everything_server(), "echo", {"message": "signoff"}, tmp_path / "stderr"
    )

    assert {"echo", "get-sum", "get-structured-content"} <= names(tools)
    assert not result.is_error, text_of(result)
    assert text_of(result) == "Echo: signoff"


def test_time_server_tells_the_time(tmp_path: Path) -> None:
    tools, result = list_and_call(
        time_server(), "get_current_time", {"timezone": "UTC"}, tmp_path / "stderr"
    )

    assert names(tools) == {"get_current_time", "convert_time"}
    assert not result.is_error, text_of(result)
    assert json.loads(text_of(result))["timezone"] == "UTC"


def test_git_server_reports_status(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=TIMEOUT)
    (repo / "untracked.txt").write_text("new\n")

    tools, result = list_and_call(
        git_server(repo), "git_status", {"repo_path": str(repo.resolve())}, tmp_path / "stderr"
    )

    assert {"git_status", "git_log", "git_commit", "git_reset"} <= names(tools)
    assert not result.is_error, text_of(result)
    assert "untracked.txt" in text_of(result)


def test_inspector_cli_lists_the_everything_servers_tools(tmp_path: Path) -> None:
    server = everything_server()
    home = tmp_path / "home"  # the inspector keeps a catalog and secrets under ~/.mcp-inspector
    home.mkdir()
    env = {**os.environ, "HOME": str(home), **server.env_extra}

    done = subprocess.run(
        [
            *inspector_cli(),
            "--format",
            "json",
            "--quiet",
            "--method",
            "tools/list",
            server.command,
            *server.args,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=TIMEOUT,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    listed = {t["name"] for t in json.loads(done.stdout)["result"]["tools"]}
    assert {"echo", "get-sum"} <= listed
