"""Service configuration: flags > environment > config file > defaults.

Each service declares its options on an argparse parser; `parse_args` adds the common
ones (`--config`, `--log-json`, `--log-level`) and resolves every option from, in order of
precedence, the command line, `<PREFIX>_<DEST>` environment variables, and the YAML file
named by `--config` (keys are the option names with dashes or underscores).

The resolved namespace is read once, into a service's frozen settings
(`splitsched.runtime.settings.ServiceSettings.load`), and not changed after.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the source and key."""


def _add_common(parser: argparse.ArgumentParser) -> None:
    existing = {a.dest for a in parser._actions}
    if "config" not in existing:
        parser.add_argument("--config", help="YAML file of option values (flags and env win)")
    if "log_json" not in existing:
        parser.add_argument("--log-json", action="store_true", default=None, help="log JSON lines")
    if "log_level" not in existing:
        parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")


def _coerce(action: argparse.Action, raw: Any, source: str) -> Any:
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{source}: expected a boolean, got {raw!r}")
    if action.type is not None and isinstance(raw, str):
        try:
            return action.type(raw)  # type: ignore[operator]
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: {exc}") from exc
    is_list = action.nargs in ("*", "+") or isinstance(action, argparse._AppendAction)
    if is_list and isinstance(raw, str):
        return [part.strip() for part in raw.split(",") if part.strip()]
    return raw


def parse_args(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    *,
    env_prefix: str,
    environ: Mapping[str, str] | None = None,
) -> argparse.Namespace:
    _add_common(parser)
    env = os.environ if environ is None else environ
    first, _ = parser.parse_known_args(argv)
    file_values: dict[str, Any] = {}
    config_path = getattr(first, "config", None) or env.get(f"{env_prefix}_CONFIG")
    if config_path:
        try:
            loaded = yaml.safe_load(Path(config_path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            parser.error(f"cannot read config file {config_path}: {exc}")
        if not isinstance(loaded, Mapping):
            parser.error(f"config file {config_path}: expected a mapping of option values")
        file_values = {str(k).replace("-", "_"): v for k, v in loaded.items()}
    known = {a.dest: a for a in parser._actions if a.dest not in ("help",)}
    unknown = sorted(set(file_values) - set(known))
    if unknown:
        parser.error(f"config file {config_path}: unknown options {', '.join(unknown)}")
    defaults: dict[str, Any] = {}
    try:
        for dest, action in known.items():
            env_key = f"{env_prefix}_{dest.upper()}"
            if env_key in env:
                defaults[dest] = _coerce(action, env[env_key], f"${env_key}")
            elif dest in file_values:
                defaults[dest] = _coerce(action, file_values[dest], f"{config_path}: {dest}")
    except ConfigError as exc:
        parser.error(str(exc))
    parser.set_defaults(**defaults)
    return parser.parse_args(argv)
