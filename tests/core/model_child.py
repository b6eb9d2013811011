"""A process that begins a model call and is killed before the answer (tests/core/test_model_calls).

    python -m tests.core.model_child DATABASE

It begins run ``r`` (at most 100 tokens), opens a step, begins a call projected at 60 tokens
(a 40-byte prompt, 50 output tokens at most), says ``begun`` and kills itself with SIGKILL:
the provider may have answered, and nobody will ever record it.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from core.gate import Gate, GateConfig
from core.limits import Limits
from core.prices import ModelConfig, Prices
from core.store import Store

PRICES = {"acme/small": {"input_per_mtok": "3.00", "output_per_mtok": "15.00"}}


def main(database: Path) -> None:
    with Store.open(database) as store:
        config = ModelConfig(Prices.from_mapping(PRICES))
        gate = Gate(GateConfig(store=store, tools=[], anchor=None, model=config))
        session = gate.begin("r", "goal", Limits(max_tokens=100))
        step = session.step()
        assert step is not None
        caller = step.model()
        assert caller is not None
        caller.begin("acme", "small", prompt="x" * 40, max_output_tokens=50)
        print("begun", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
