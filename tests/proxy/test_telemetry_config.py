"""``[telemetry]`` in config.toml (core/proxy/telemetry.py): one key, a URL, refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError
from core.proxy.config import load_text

FILE = Path("/home/me/.config/signoff/config.toml")


def test_the_otlp_endpoint_is_read_and_absent_means_no_telemetry() -> None:
    config = load_text(FILE, '[telemetry]\notlp = "https://collector.example:4318/v1/traces"\n')
    assert config.telemetry_otlp == "https://collector.example:4318/v1/traces"
    assert load_text(FILE, "hold_seconds = 1\n").telemetry_otlp is None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            '[telemetry]\notlp = "file:///etc/passwd"\n',
            "'file:///etc/passwd' is not",
        ),
        ("[telemetry]\notlp = 4318\n", "telemetry.otlp: 4318 is not an http:// or https:// URL"),
        ('[telemetry]\nurl = "http://127.0.0.1:4318"\n', "telemetry.url: unknown key"),
        ('telemetry = "http://127.0.0.1:4318"\n', "telemetry: must be a table"),
    ],
)
def test_a_bad_telemetry_table_is_refused_naming_the_line(text: str, said: str) -> None:
    with pytest.raises(ConfigError, match=r"config\.toml:[12]: ") as refused:
        load_text(FILE, text)
    assert said in str(refused.value)
