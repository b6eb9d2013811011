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
    cut_at_the_limit,
    mask_times,
    no_list_changed,
    refused_by_signoff,
    signoff_server_info,
    tools_and_logging_only,
    without_icons,
    without_status_tool,
)

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
        "tasks are not proxied; tools.listChanged is true whatever the server declares"
        " (Signoff's own tool set changes when the operator reviews tools, decision 0054);"
        " logging and completions are declared as the server declares them, prompts and"
        " resources whenever the server declares them, with listChanged true (the operator"
        " may turn them on or off while the proxy runs, decisions 0055 and 0062)",
        tools_and_logging_only,
        # The filesystem and memory servers declare tools with listChanged, and no tasks.
        servers=("everything", "time", "git"),
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
        "D-TOOL-ICONS",
        "tools/list",
        "by design: a tool's icons are not forwarded (decision 0031: URLs or data a host fetches"
        " and shows, outside what the operator pinned)",
        without_icons,
        servers=("fake",),  # none of the real servers in the suite lists icons
    ),
    # Results.
    Difference(
        "D-RESULT-LIMIT",
        "result/over-limit",
        "by design: a result over the operator's result_limit_bytes (default 1 MiB) is cut: what"
        " fits is kept in order, a last text block says what was cut, and isError is true"
        " (decision 0029)",
        cut_at_the_limit,
        servers=("filesystem", "filesystem-roots"),
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
    # Roots, progress, logging, notifications.
    Difference(
        "D-NO-LIST-CHANGED",
        "notifications/other",
        "by design: a server's tools/list_changed is not passed on as it came: Signoff lists"
        " the server again and tells the host only when the tools it offers changed (a new or"
        " changed tool waits for the operator's review first; decision 0054)",
        no_list_changed,
        servers=("everything",),
    ),
]

VOLATILE: list[Mask] = [
    Mask(
        "V-RESOURCE-TIME",
        ("content/embedded-text", "resources/read"),
        "server-everything writes the time of day of the call into the resources it makes",
        mask_times,
        servers=("everything",),
    ),
]
