"""The conformance suite: the same client script run against real MCP servers directly and
through ``signoff proxy``, compared step by step.

- script.py       what each client does with each server (the steps, and the feature each
                  step observes)
- targets.py      the servers, their files, and a Signoff home configured through the CLI
- wire.py         a transport that keeps every JSON-RPC message each way, as received
- sdk.py          the script run by the mcp SDK's ClientSession (and one Client in auto mode)
- inspector.py    the script steps the MCP Inspector CLI can express
- differences.py  every known difference between direct and proxied, named, with its reason
                  and the normalisation the comparison applies for it
- compare.py      the comparison: equal, or equal after exactly the listed differences
- observed.json   the matrix the suite observed (feature x server x client)
- render.py       docs/compatibility.md from observed.json and the differences' reasons
"""
