"""The shared settings helpers (`splitsched.runtime.settings`): listen addresses checked and
split, list options read from repeated or comma-separated values, minimums that name the
flag."""

from __future__ import annotations

import pytest

from splitsched.runtime import settings as shared
from splitsched.runtime.config import ConfigError


@pytest.mark.parametrize(
    ("value", "host", "port"),
    [("0.0.0.0:9091", "0.0.0.0", 9091), (":0", "0.0.0.0", 0), ("[::1]:80", "[::1]", 80)],
)
def test_listen_addresses_are_host_and_port(value: str, host: str, port: int) -> None:
    serving = shared.Serving(
        listen=shared.listen_address(value, flag="--listen"),
        http_listen=shared.listen_address(value, flag="--http-listen"),
    )
    assert (serving.http_host, serving.http_port) == (host, port)


@pytest.mark.parametrize("value", ["9091", "host:", "host:http", "host:70000", ""])
def test_a_listen_address_that_is_not_host_port_names_the_flag(value: str) -> None:
    with pytest.raises(ConfigError, match=f"^--http-listen {value!r}: expected host:port$"):
        shared.listen_address(value, flag="--http-listen")


def test_list_options_split_on_commas_and_drop_blanks() -> None:
    assert shared.split_names(["a,b", " c ", ""]) == ("a", "b", "c")
    assert shared.split_names("a, b") == ("a", "b")
    assert shared.split_names(None) == ()


def test_minimums_name_the_flag() -> None:
    shared.at_least(1, 1, flag="--workers")
    with pytest.raises(ConfigError, match=r"^--workers must be at least 1, got 0$"):
        shared.at_least(0, 1, flag="--workers")
