"""The script steps the MCP Inspector CLI can express, one Inspector process per step.

The Inspector starts the server from a configuration file of its own (``--config``), which also
gives it the target's roots: it always declares roots, and answers ``roots/list`` with these.
Its ``--method initialize`` prints the handshake's answer as it kept it; ``tools/list`` and
``tools/call`` print the results; a refusal exits non-zero with an error envelope on stderr.
Each step's observation is that output, parsed.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.conformance.script import Step, fill
from tests.conformance.targets import Target
from tests.mcp_servers import ServerCommand, inspector_cli

STEP_WITHIN = 120  # seconds for one Inspector run: far above its time
AT_ONCE = 4  # Inspector runs at once: each mostly waits for its server to start and stop


def _arguments(step: Step, target: Target) -> list[str]:
    if step.kind == "initialize":
        return ["--method", "initialize"]
    if step.kind == "list":
        return ["--method", "tools/list"]
    if step.kind == "call":
        arguments = json.dumps(fill(step.arguments, target.places))
        return ["--method", "tools/call", "--tool-name", step.tool, "--tool-args-json", arguments]
    if step.kind == "set-level":
        return ["--method", "logging/setLevel", "--log-level", step.arguments["level"]]
    if step.kind == "request" and step.tool in INSPECTOR_METHODS:
        said = ["--method", step.tool]
        if "uri" in step.arguments:
            said += ["--uri", step.arguments["uri"]]
        if "name" in step.arguments:
            said += ["--prompt-name", step.arguments["name"]]
        pairs = [f"{k}={v}" for k, v in (step.arguments.get("arguments") or {}).items()]
        return said + (["--prompt-args", *pairs] if pairs else [])
    raise ValueError(f"the Inspector CLI cannot express a {step.kind} step")


# What its CLI asks of prompts and resources (it has no subscribe, and no completion).
INSPECTOR_METHODS = ("prompts/list", "prompts/get", "resources/list", "resources/templates/list",
                     "resources/read")  # fmt: skip


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return {"unparsed": text.strip().splitlines()[-1:] if text.strip() else []}


def _one(arguments: list[str], config: Path, home: Path) -> Any:
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}  # its catalog and storage stay there
    done = subprocess.run(
        [
            *inspector_cli(),
            "--config",
            str(config),
            "--server",
            "target",
            "--format",
            "json",
            "--quiet",
            *arguments,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=STEP_WITHIN,
        check=False,
    )
    if done.returncode == 0:
        return _parsed(done.stdout)
    return {"exit": done.returncode, "error": _parsed(done.stderr)}


def _config(command: ServerCommand, target: Target, path: Path) -> Path:
    roots = [{"uri": p.as_uri(), "name": p.name} for p in target.roots_initial]
    server = {"command": command.command, "args": command.args, "env": command.env_extra,
              "roots": roots, "protocolEra": "legacy"}  # fmt: skip
    path.write_text(json.dumps({"mcpServers": {"target": server}}))
    return path


def _observations(steps: list[Step], outputs: dict[str, Any]) -> dict[str, Any]:
    observed: dict[str, Any] = {}
    for step in steps:
        if step.kind == "initialize":
            handshake = outputs["initialize"]
            answer = handshake.get("result") if "exit" not in handshake else None
            observed[step.id] = answer.get(step.aspect) if isinstance(answer, dict) else handshake
        else:
            observed[step.id] = outputs[step.id]
    return observed


def run(
    direct: ServerCommand, proxied: ServerCommand, target: Target, steps: list[Step], workdir: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each step's observation by step id, directly and through the proxy: every Inspector
    run of both sides at once, ``AT_ONCE`` at a time (the steps change nothing). The
    handshake's steps share one run."""
    assert all(s.feature != "mutation" for s in steps), "the Inspector's runs overlap"
    workdir.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[str]] = {}
    for step in steps:
        key = "initialize" if step.kind == "initialize" else step.id
        runs.setdefault(key, _arguments(step, target))
    configs = {"direct": _config(direct, target, workdir / "direct.json"),
               "proxied": _config(proxied, target, workdir / "proxied.json")}  # fmt: skip
    with ThreadPoolExecutor(AT_ONCE) as pool:
        futures = {(side, key): pool.submit(_one, args, config, workdir / f"{side}-{key}")
                   for side, config in configs.items() for key, args in runs.items()}  # fmt: skip
        outputs = {key: future.result() for key, future in futures.items()}
    direct_out = {key: value for (side, key), value in outputs.items() if side == "direct"}
    proxied_out = {key: value for (side, key), value in outputs.items() if side == "proxied"}
    return _observations(steps, direct_out), _observations(steps, proxied_out)
