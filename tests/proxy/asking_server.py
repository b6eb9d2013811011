"""An MCP server built with the mcp SDK that asks its client: ``ask_name`` elicits a name from
the user (``ask_briefly`` withdraws the question after a second, ``ask_stubbornly`` never does),
``ask_url`` sends the user to a page (URL mode) and says when it is done, ``ask_model`` samples
the client's model, ``capabilities`` says what the client declared. Each says in its result what
came back, or the error its client answered with, so a test reads both ends in the host's
result."""

from __future__ import annotations

import warnings

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

warnings.simplefilter("ignore")  # sampling is deprecated in the SDK; this server uses it anyway

server = MCPServer("asking")


class Name(BaseModel):
    name: str


@server.tool(description="Ask the user for a name")
async def ask_name(ctx: Context) -> str:
    try:
        answer = await ctx.elicit("What is your name?", Name)
    except MCPError as e:
        return f"error {e.code}: {e.message}"
    if answer.action == "accept":
        return f"accept: {answer.data.name}"
    return answer.action


@server.tool(description="Ask the user, but give up after a moment")
async def ask_briefly(ctx: Context) -> str:
    with anyio.move_on_after(1.0):  # the SDK then withdraws its request (notifications/cancelled)
        answer = await ctx.elicit("Quick: your name?", Name)
        return answer.action
    return "gave up"


@server.tool(description="Ask the user, and keep asking even when the call is cancelled")
async def ask_stubbornly(ctx: Context) -> str:
    with anyio.CancelScope(shield=True):  # never withdraws its question
        try:
            answer = await ctx.elicit("Your name, please?", Name)
        except MCPError as e:
            return f"error {e.code}: {e.message}"
    return answer.action


@server.tool(description="Send the user to a page, and say when it is done")
async def ask_url(ctx: Context) -> str:
    try:
        answer = await ctx.elicit_url("Sign in there", "https://example.invalid/sign-in", "e1")
    except MCPError as e:
        return f"error {e.code}: {e.message}"
    if answer.action == "accept":
        await ctx.session.send_elicit_complete("e1")
    return answer.action


@server.tool(description="Ask the client's model a question")
async def ask_model(question: str, ctx: Context) -> str:
    message = types.SamplingMessage(
        role="user", content=types.TextContent(type="text", text=question)
    )
    try:
        result = await ctx.session.create_message([message], max_tokens=50)
    except MCPError as e:
        return f"error {e.code}: {e.message}"
    content = result.content
    return f"model: {getattr(content, 'text', content)}"


@server.tool(description="The capabilities the client declared")
async def capabilities(ctx: Context) -> str:
    declared = ctx.session.client_capabilities
    return "" if declared is None else declared.model_dump_json(exclude_none=True)


if __name__ == "__main__":
    server.run("stdio")
