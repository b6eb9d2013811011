"""Every known difference between a server's answers directly and through ``signoff proxy``.

Each ``Difference`` names one loss or change, the feature(s) it concerns, why it exists, and
the normalisation the comparison applies for it: ``normalise(direct, proxied, context)`` turns
the two observations of a step into what they are once that difference is taken into account
(most often: the direct answer turned into what the proxy makes of it today). A step must
compare equal after only the differences it needs (tests/conformance/compare.py); a difference
that applies to a run but that none of its steps needs fails the run as stale: delete it.

Reasons: "not yet built: issue 19" is a loss the issue's work packages remove (each deletes the
differences it fixes); "by design" is a difference Signoff keeps, and says why.

``VOLATILE`` masks what a server makes up anew on every call (a time of day): applied to both
sides alike, it hides nothing the proxy does, and is never stale.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.conformance.normalise import (
    Context,
    Normalise,
    capped,
    drop_annotations,
    drop_structured,
    embedded_as_text,
    error_data_named,
    explicit_is_error,
    link_as_text,
    mask_times,
    merged,
    modern_era,
    no_list_changed,
    no_log_messages,
    no_progress,
    no_set_level,
    placeholder,
    refused_by_signoff,
    refused_without_roots,
    roots_not_asked,
    rpc_error_as_failure,
    signoff_instructions,
    signoff_server_info,
    tools_capability_only,
    without_metadata,
    without_roots_only_tools,
    without_status_tool,
)
from tests.conformance.script import INSPECTOR, SDK, SDK_AUTO

__all__ = ["DIFFERENCES", "VOLATILE", "Context", "Difference", "Mask"]


@dataclass(frozen=True)
class Difference:
    id: str
    feature: str | tuple[str, ...]  # the feature, or the features, it concerns
    reason: str
    normalise: Normalise
    servers: tuple[str, ...] = ()  # only these servers (all when empty)
    clients: tuple[str, ...] = ()  # only these clients (all when empty)

    @property
    def features(self) -> tuple[str, ...]:
        return (self.feature,) if isinstance(self.feature, str) else self.feature

    def applies(self, context: Context) -> bool:
        return (
            context.step.feature in self.features
            and (not self.servers or context.server in self.servers)
            and (not self.clients or context.client in self.clients)
        )


@dataclass(frozen=True)
class Mask:
    id: str
    feature: str | tuple[str, ...]
    reason: str
    mask: Callable[[Any], Any]
    servers: tuple[str, ...] = ()

    def applies(self, context: Context) -> bool:
        features = (self.feature,) if isinstance(self.feature, str) else self.feature
        return context.step.feature in features and (
            not self.servers or context.server in self.servers
        )


NOT_YET = "not yet built: issue 19"
# Where each difference is observed: the servers (and, where it matters, the clients) whose
# scripts have a step it applies to. A difference applicable to a run that no step of the run
# needs fails the run as stale, so these lists say exactly where each one occurs today.
TS_SERVERS = ("everything", "filesystem", "memory")  # leave isError out of a success
STRUCTURED = ("everything", "filesystem", "memory", "time")
RESULTS = (
    "content/text",
    "content/image",
    "content/audio",
    "content/embedded-text",
    "content/embedded-blob",
    "content/resource-link",
    "content/annotations",
    "structuredContent",
    "mutation",
    "result/large",
    "result/over-limit",
    "progress",
)
FILE_CALLS = (*RESULTS, "error/tool")

DIFFERENCES: list[Difference] = [
    # The handshake.
    Difference(
        "D-SERVER-INFO",
        "initialize/server-info",
        "by design: the host's peer is Signoff, which may serve several servers at once;"
        " it names itself",
        signoff_server_info,
    ),
    Difference(
        "D-CAPABILITIES",
        "initialize/capabilities",
        f"{NOT_YET} for logging (to be declared when a server has it); resources, prompts,"
        " completions and tasks are not proxied (outside issue 19); tools.listChanged is"
        " false until live updates (issue 23)",
        tools_capability_only,
    ),
    Difference(
        "D-INSTRUCTIONS",
        "initialize/instructions",
        f"{NOT_YET}: the server's instructions (or their absence) are replaced by one Signoff"
        " sentence",
        signoff_instructions,
    ),
    Difference(
        "D-ERA",
        ("initialize/version", "tools/list", "content/text", "content/image", "structuredContent"),
        f"{NOT_YET}: a client in auto mode settles on the 2026-07-28"
        " era with Signoff, whose upstream speaks the handshake (the server itself answers"
        " server/discover -32601, so the client falls back); the modern era's results carry"
        " resultType, cacheScope, ttlMs and the answering server in _meta",
        modern_era,
        clients=(SDK_AUTO,),
    ),
    # The listing.
    Difference(
        "D-STATUS-TOOL",
        "tools/list",
        "by design: Signoff offers its own read-only tool signoff_status, first, which lists"
        " the calls waiting for the operator",
        without_status_tool,
    ),
    Difference(
        "D-TOOL-METADATA",
        "tools/list",
        f"{NOT_YET}: title, annotations, outputSchema, execution, _meta and icons are not"
        " forwarded",
        without_metadata,
    ),
    Difference(
        "D-ROOTS-ONLY-TOOLS",
        "tools/list",
        f"{NOT_YET}: a tool a server lists only to clients that declare roots"
        " (get-roots-list) is neither pinned (signoff pin declares no roots) nor offered (the"
        " proxy declares none upstream)",
        without_roots_only_tools,
        servers=("everything",),
        clients=(SDK, INSPECTOR),  # the clients that declare roots
    ),
    # Results, in the order the proxy's flattening applies them (core/proxy/answers.py).
    Difference(
        "D-ROOTLESS",
        FILE_CALLS,
        f"{NOT_YET}: server-filesystem started with no directory gets no roots through the"
        " proxy, so it has no allowed directory and refuses every path",
        refused_without_roots,
        servers=("filesystem-roots",),
    ),
    Difference(
        "D-ANNOTATIONS",
        "content/annotations",
        f"{NOT_YET}: content blocks' annotations are dropped",
        drop_annotations,
    ),
    Difference(
        "D-IMAGE",
        ("content/image", "content/annotations"),
        f"{NOT_YET}: an image becomes a text placeholder naming its type and size",
        placeholder("image"),
        servers=("everything", "filesystem"),
    ),
    Difference(
        "D-AUDIO",
        "content/audio",
        f"{NOT_YET}: audio becomes a text placeholder naming its type and size",
        placeholder("audio"),
        servers=("filesystem",),
    ),
    Difference(
        "D-EMBEDDED",
        ("content/embedded-text", "content/embedded-blob"),
        f"{NOT_YET}: an embedded resource becomes a text line naming its URI, followed by its"
        " text; a blob is dropped",
        embedded_as_text,
        servers=("everything", "filesystem"),
    ),
    Difference(
        "D-LINK",
        "content/resource-link",
        f"{NOT_YET}: a resource_link becomes a text line naming its URI",
        link_as_text,
    ),
    Difference(
        "D-MERGED",
        RESULTS,
        f"{NOT_YET}: a result's blocks arrive as one text block, joined by newlines",
        merged,
        servers=("everything",),
    ),
    Difference(
        "D-CAP-64K",
        ("result/large", "result/over-limit"),
        f"{NOT_YET}: a result's text is cut at a fixed 64 KiB with a marker, isError false;"
        " the operator's limit (default 1 MiB, over it: cut, marked, isError) replaces it",
        capped,
        servers=("filesystem", "git"),
    ),
    Difference(
        "D-STRUCTURED",
        RESULTS,
        f"{NOT_YET}: structuredContent is dropped",
        drop_structured,
        servers=STRUCTURED,
    ),
    Difference(
        "D-ISERROR-FALSE",
        RESULTS,
        f"{NOT_YET} (results pass as the server sent them): isError: false is added where the"
        " server left it out (the same meaning: the specification's default)",
        explicit_is_error,
        servers=TS_SERVERS,
    ),
    # Refusals.
    Difference(
        "D-SCHEMA-FIRST",
        "error/arguments",
        "by design: Signoff checks the arguments against the pinned input schema and refuses"
        " in its own words; the call never reaches the server",
        refused_by_signoff("schema"),
    ),
    Difference(
        "D-NOT-OFFERED",
        "error/unknown-tool",
        "by design: Signoff answers a call of a tool it does not offer (isError, saying why)"
        " without asking the server",
        refused_by_signoff("is not available"),
    ),
    Difference(
        "D-RPC-ERROR",
        "error/json-rpc",
        f"{NOT_YET}: a server's JSON-RPC error to a tools/call becomes a failed call (isError)"
        " whose text carries the server's message; its code and data are lost",
        rpc_error_as_failure,
    ),
    # Roots, progress, logging, notifications.
    Difference(
        "D-NO-ROOTS",
        ("roots/initial", "roots/changed"),
        f"{NOT_YET}: the proxy declares no roots upstream and never answers roots/list: the"
        " server works from its own arguments",
        roots_not_asked,
    ),
    Difference(
        "D-NO-PROGRESS",
        "progress",
        f"{NOT_YET}: notifications/progress are not forwarded",
        no_progress,
    ),
    Difference(
        "D-NO-SET-LEVEL",
        "logging/setLevel",
        f"{NOT_YET}: Signoff declares no logging capability and answers logging/setLevel"
        " -32601 (method not found) itself; the Inspector, seeing no capability, does not send"
        " it",
        no_set_level,
        servers=("everything",),
    ),
    Difference(
        "D-SET-LEVEL-DATA",
        "logging/setLevel",
        "Signoff, not the server, answers logging/setLevel for a server without logging (issue"
        " 19 forwards it only to servers that declare logging): the same -32601, with the"
        " method named in data, as the mcp SDK answers",
        error_data_named,
        servers=("filesystem", "filesystem-roots", "memory"),
    ),
    Difference(
        "D-NO-LOG-MESSAGES",
        "logging/message",
        f"{NOT_YET}: the server's notifications/message are not forwarded",
        no_log_messages,
        servers=("everything",),
    ),
    Difference(
        "D-NO-LIST-CHANGED",
        "notifications/other",
        "not yet built: issue 23 (live updates): list_changed notifications are not forwarded",
        no_list_changed,
        servers=("everything",),
    ),
]

VOLATILE: list[Mask] = [
    Mask(
        "V-RESOURCE-TIME",
        "content/embedded-text",
        "server-everything writes the time of day of the call into the resources it makes",
        mask_times,
        servers=("everything",),
    ),
]
