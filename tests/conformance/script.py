"""What the clients do with each server: a list of steps per server, each observing one feature.

A step's arguments may name the target's places as ``{shared}``, ``{outside}``, ``{repo}``
(tests/conformance/targets.py fills them in). The same steps run directly and through the
proxy; only the values a server makes up anew on every call are masked (``VOLATILE`` in
tests/conformance/differences.py), never what the proxy changes.

Steps are chosen so that every answer is the same on two runs a few seconds apart: no current
time, no random data (server-everything's simulated logging picks a random level: not used).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SDK = "sdk"  # the mcp SDK's ClientSession: the handshake, roots, progress, logging
SDK_AUTO = "sdk-auto"  # the mcp SDK's Client in its default mode "auto" (discover first)
INSPECTOR = "inspector"  # the MCP Inspector CLI: one process per step
CLIENTS = (SDK, SDK_AUTO, INSPECTOR)

# The features, in the order docs/compatibility.md shows them, with what each means.
FEATURES: dict[str, str] = {
    "initialize/version": "the protocol version the handshake settles on",
    "initialize/server-info": "serverInfo (name, title, version)",
    "initialize/capabilities": "the capabilities the server declares",
    "initialize/instructions": "the server's instructions (model input)",
    "tools/list": "the tools listed, with name, title, description, schemas, annotations, _meta",
    "content/text": "a result of text blocks",
    "content/image": "an image block (base64 bytes, MIME type)",
    "content/audio": "an audio block",
    "content/embedded-text": "an embedded resource with text",
    "content/embedded-blob": "an embedded resource with a base64 blob",
    "content/resource-link": "resource_link blocks",
    "content/annotations": "content blocks carrying annotations (audience, priority)",
    "structuredContent": "structuredContent beside the content",
    "error/tool": "a tool's own failure: isError with the server's message",
    "error/arguments": "arguments the tool's schema refuses",
    "error/unknown-tool": "a call of a tool the server does not have",
    "error/json-rpc": "a JSON-RPC error a server answers a tools/call of a tool it offers with",
    "mutation": "a mutating tool, allowed by the operator's policy, run once",
    "result/large": "a result of a few hundred kB (a 219 kB file, a 438 kB diff)",
    "result/over-limit": "a result over 1 MiB (a 2 MiB file), over the planned default limit",
    "roots/initial": "the roots the client declares reach the server, which acts on them",
    "roots/changed": "roots/list_changed reaches the server, which asks again",
    "progress": "notifications/progress during a call, with the client's token",
    "logging/setLevel": "logging/setLevel answered as the server answers it",
    "logging/message": "the server's notifications/message reach the client",
    "notifications/other": "the server's other notifications (list_changed and the like)",
    "prompts/list": "the prompts listed (names, descriptions, arguments: pinned model input)",
    "prompts/get": "a prompt got, with its arguments: the messages the server makes of it",
    "resources/list": "the resources listed",
    "resources/templates/list": "the resource templates listed (pinned model input)",
    "resources/read": "a resource read by its URI, text or blob",
    "resources/subscribe": "resources/subscribe and unsubscribe for a listed URI",
    "completion/complete": "completion of a prompt's or a template's argument",
    "ping": "ping from the client",
}


@dataclass(frozen=True)
class Step:
    id: str  # unique within a server's script
    feature: str
    # initialize, list, call, ping, set-level, roots-initial, roots-changed, log, notes, or
    # request: the method ``tool`` with the params ``arguments`` (prompts, resources, completion)
    kind: str
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    clients: tuple[str, ...] = (SDK,)
    aspect: str = ""  # initialize: the key of the handshake's answer
    progress: bool = False  # call: with a progress token


ALL = (SDK, INSPECTOR)

HANDSHAKE = [
    Step("version", "initialize/version", "initialize", aspect="protocolVersion", clients=ALL),
    Step("server-info", "initialize/server-info", "initialize", aspect="serverInfo", clients=ALL),
    Step(
        "capabilities", "initialize/capabilities", "initialize", aspect="capabilities", clients=ALL
    ),
    Step(
        "instructions", "initialize/instructions", "initialize", aspect="instructions", clients=ALL
    ),
    Step("tools", "tools/list", "list", clients=ALL),
    Step("ping", "ping", "ping"),
]
SET_LEVEL = Step("set-level", "logging/setLevel", "set-level", arguments={"level": "debug"})
# Last in every script: what the server sent on its own during the whole session.
CLOSING = [
    Step("log-messages", "logging/message", "log"),
    Step("notifications", "notifications/other", "notes"),
]


def unknown_tool() -> Step:
    # Not by the Inspector: it refuses a tool its listing lacks without asking the server.
    return Step("unknown-tool", "error/unknown-tool", "call", "no_such_tool", {})


DOCUMENT = "demo://resource/static/document/architecture.md"
WATCHED = "demo://resource/static/document/features.md"
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
# server-everything's prompts, resources, templates, subscriptions and completion (decision
# 0055); the Inspector has no subscribe and no completion.
EVERYTHING_CATALOG = [
    Step("prompts", "prompts/list", "request", "prompts/list", clients=ALL),
    Step("prompt-simple", "prompts/get", "request", "prompts/get", {"name": "simple-prompt"}),
    Step("prompt-args", "prompts/get", "request", "prompts/get",
         {"name": "args-prompt", "arguments": {"city": "Lyon", "state": "Rhône"}}, clients=ALL),
    Step("resources", "resources/list", "request", "resources/list", clients=ALL),
    Step("templates", "resources/templates/list", "request", "resources/templates/list",
         clients=ALL),
    Step("read-static", "resources/read", "request", "resources/read", {"uri": DOCUMENT},
         clients=ALL),
    Step("read-template", "resources/read", "request", "resources/read",
         {"uri": "demo://resource/dynamic/text/1"}),
    Step("subscribe", "resources/subscribe", "request", "resources/subscribe", {"uri": WATCHED}),
    Step("unsubscribe", "resources/subscribe", "request", "resources/unsubscribe",
         {"uri": WATCHED}),
    Step("complete-prompt", "completion/complete", "request", "completion/complete",
         {"ref": {"type": "ref/prompt", "name": "completable-prompt"},
          "argument": {"name": "department", "value": "E"}}),
    Step("complete-template", "completion/complete", "request", "completion/complete",
         {"ref": {"type": "ref/resource", "uri": TEXT_TEMPLATE},
          "argument": {"name": "resourceId", "value": "1"}}),
]  # fmt: skip

EVERYTHING = [
    *HANDSHAKE,
    Step("set-level", "logging/setLevel", "set-level", arguments={"level": "debug"}, clients=ALL),
    Step("echo", "content/text", "call", "echo", {"message": "signoff"}),
    Step("sum", "content/text", "call", "get-sum", {"a": 2, "b": 3}),
    Step("tiny-image", "content/image", "call", "get-tiny-image", {}, clients=ALL),
    Step(
        "annotated",
        "content/annotations",
        "call",
        "get-annotated-message",
        {"messageType": "error", "includeImage": True},
    ),
    Step(
        "embedded-text",
        "content/embedded-text",
        "call",
        "get-resource-reference",
        {"resourceType": "Text", "resourceId": 2},
        clients=ALL,
    ),
    Step("links", "content/resource-link", "call", "get-resource-links", {"count": 2}),
    Step(
        "structured",
        "structuredContent",
        "call",
        "get-structured-content",
        {"location": "Chicago"},
        clients=ALL,
    ),
    Step("bad-arguments", "error/arguments", "call", "get-sum", {"a": "two", "b": 3}),
    unknown_tool(),
    Step(
        "long-operation",
        "progress",
        "call",
        "trigger-long-running-operation",
        {"duration": 1, "steps": 5},
        progress=True,
    ),
    Step("roots-initial", "roots/initial", "roots-initial", "get-roots-list", {}),
    Step("roots-changed", "roots/changed", "roots-changed", "get-roots-list", {}),
    *EVERYTHING_CATALOG,
    *CLOSING,
]

# server-everything with the SDK's Client in auto mode: what the era it settles on changes.
EVERYTHING_AUTO = [
    Step(
        "version", "initialize/version", "initialize", aspect="protocolVersion", clients=(SDK_AUTO,)
    ),
    Step("tools", "tools/list", "list", clients=(SDK_AUTO,)),
    Step("echo", "content/text", "call", "echo", {"message": "signoff"}, clients=(SDK_AUTO,)),
    Step("tiny-image", "content/image", "call", "get-tiny-image", {}, clients=(SDK_AUTO,)),
    Step(
        "structured",
        "structuredContent",
        "call",
        "get-structured-content",
        {"location": "Chicago"},
        clients=(SDK_AUTO,),
    ),
]

FILESYSTEM = [
    *HANDSHAKE,
    SET_LEVEL,
    # Roots first: the server replaces its directories with the client's roots at once.
    Step("roots-initial", "roots/initial", "roots-initial", "list_allowed_directories", {}),
    Step(
        "read-text",
        "content/text",
        "call",
        "read_text_file",
        {"path": "{shared}/hello.txt"},
        clients=ALL,
    ),
    Step("list-directory", "content/text", "call", "list_directory", {"path": "{shared}"}),
    Step(
        "image",
        "content/image",
        "call",
        "read_media_file",
        {"path": "{shared}/image.png"},
        clients=ALL,
    ),
    Step("audio", "content/audio", "call", "read_media_file", {"path": "{shared}/sound.wav"}),
    Step("blob", "content/embedded-blob", "call", "read_media_file", {"path": "{shared}/data.bin"}),
    Step("outside", "error/tool", "call", "read_text_file", {"path": "{outside}/secret.txt"}),
    Step("bad-arguments", "error/arguments", "call", "read_text_file", {"path": 7}),
    Step(
        "write",
        "mutation",
        "call",
        "write_file",
        {"path": "{shared}/written.txt", "content": "written once\n"},
    ),
    Step("large", "result/large", "call", "read_text_file", {"path": "{shared}/large.txt"}),
    Step(
        "over-limit", "result/over-limit", "call", "read_text_file", {"path": "{shared}/huge.txt"}
    ),
    unknown_tool(),
    # Last: the new roots leave only {shared}/sub reachable.
    Step("roots-changed", "roots/changed", "roots-changed", "list_allowed_directories", {}),
    *CLOSING,
]

MEMORY = [
    *HANDSHAKE,
    SET_LEVEL,
    Step(
        "create",
        "mutation",
        "call",
        "create_entities",
        {
            "entities": [
                {"name": "signoff", "entityType": "project", "observations": ["gates tool calls"]},
                {"name": "proxy", "entityType": "component", "observations": ["speaks MCP"]},
            ]
        },
    ),
    Step(
        "relate",
        "mutation",
        "call",
        "create_relations",
        {"relations": [{"from": "signoff", "to": "proxy", "relationType": "contains"}]},
    ),
    Step("read-graph", "structuredContent", "call", "read_graph", {}, clients=ALL),
    Step("search", "structuredContent", "call", "search_nodes", {"query": "proxy"}),
    Step(
        "missing-entity",
        "error/tool",
        "call",
        "add_observations",
        {"observations": [{"entityName": "nobody", "contents": ["x"]}]},
    ),
    Step("bad-arguments", "error/arguments", "call", "open_nodes", {"names": "signoff"}),
    unknown_tool(),
    Step("resources", "resources/list", "request", "resources/list", clients=ALL),
    Step("templates", "resources/templates/list", "request", "resources/templates/list"),
    Step(
        "read-graph-resource",
        "resources/read",
        "request",
        "resources/read",
        {"uri": "memory://knowledge-graph"},
        clients=ALL,
    ),
    Step(
        "subscribe",
        "resources/subscribe",
        "request",
        "resources/subscribe",
        {"uri": "memory://knowledge-graph"},
    ),
    *CLOSING,
]

TIME = [
    *HANDSHAKE,
    SET_LEVEL,
    # convert_time uses today's date in the source zone: equal on two runs on the same day.
    Step(
        "convert",
        "structuredContent",
        "call",
        "convert_time",
        {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        clients=ALL,
    ),
    Step(
        "bad-zone",
        "error/tool",
        "call",
        "convert_time",
        {"source_timezone": "Nowhere/Atlantis", "time": "12:00", "target_timezone": "UTC"},
    ),
    Step("bad-arguments", "error/arguments", "call", "convert_time", {"time": "12:00"}),
    unknown_tool(),
    *CLOSING,
]

GIT = [
    *HANDSHAKE,
    SET_LEVEL,
    Step("status", "content/text", "call", "git_status", {"repo_path": "{repo}"}, clients=ALL),
    Step("log", "content/text", "call", "git_log", {"repo_path": "{repo}", "max_count": 2}),
    Step("diff", "result/large", "call", "git_diff_unstaged", {"repo_path": "{repo}"}),
    Step(
        "bad-revision",
        "error/tool",
        "call",
        "git_diff",
        {"repo_path": "{repo}", "target": "no-such-branch"},
    ),
    Step("bad-arguments", "error/arguments", "call", "git_status", {"repo_path": 7}),
    unknown_tool(),
    *CLOSING,
]

# tests/proxy/fake_server.py: none of the real servers answers a call of a tool it lists with a
# JSON-RPC error (their SDKs turn every failure into isError), the project's fake server does.
FAKE = [
    Step("tools", "tools/list", "list", clients=ALL),
    Step("rpc-error", "error/json-rpc", "call", "refuse", {}, clients=ALL),
]

SCRIPTS: dict[str, list[Step]] = {
    "everything": EVERYTHING,
    "filesystem": FILESYSTEM,
    "filesystem-roots": FILESYSTEM,
    "memory": MEMORY,
    "time": TIME,
    "git": GIT,
    "fake": FAKE,
}


def steps(server: str, client: str) -> list[Step]:
    """The steps ``client`` runs against ``server``. The Inspector connects afresh for each
    step; against server-filesystem started without directories a call would race the
    server's own request for the roots, so there it only reads the handshake and the list."""
    if client == SDK_AUTO:
        return EVERYTHING_AUTO if server == "everything" else []
    chosen = [s for s in SCRIPTS[server] if client in s.clients]
    if client == INSPECTOR and server == "filesystem-roots":
        chosen = [s for s in chosen if s.kind in ("initialize", "list")]
    return chosen


def fill(value: Any, places: dict[str, str]) -> Any:
    """``value`` with ``{name}`` in its strings replaced by the target's places."""
    if isinstance(value, str):
        for name, path in places.items():
            value = value.replace("{" + name + "}", path)
        return value
    if isinstance(value, list):
        return [fill(v, places) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, places) for k, v in value.items()}
    return value
