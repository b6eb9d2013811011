# The two commands the README gives. Both do all the set-up on a fresh clone.
.PHONY: run test quick bench compatibility

run:        ## set up and start Signoff (ARGS="verify" for a command)
	@bash scripts/run.sh $(ARGS)

test:       ## set up and run every check: lint, types, all tests
	@bash scripts/test.sh $(ARGS)

quick:      ## lint, types and the fast tests of what changed (BASE=main: since main)
	@bash scripts/quick.sh $(BASE)

bench:      ## run the benchmarks (slow: builds large databases)
	@bash scripts/setup.sh test && .venv/bin/python bench/verify.py && .venv/bin/python bench/cli.py && .venv/bin/python bench/classify.py

compatibility:  ## run the conformance suite afresh: tests/conformance/observed.json, docs/compatibility.md
	@bash scripts/setup.sh test && bash scripts/mcp-servers.sh && PYTHONPATH=$(CURDIR) .venv/bin/python -m tests.conformance.render --observe
