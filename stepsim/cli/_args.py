"""Option parsers shared by the subcommands (standard library only: imported at parse time).

* :func:`nm` — an argparse ``type=`` for "N:M" options;
* :func:`key_values` — repeatable ``KEY=VALUE`` options into a dict;
* :func:`run_params` — the parsed options as the ``params`` of a result file.
"""

from __future__ import annotations

import argparse


class OptionError(argparse.ArgumentTypeError, ValueError):
    """A bad option value. argparse prints it after the option's name ("argument --nm: ...");
    called outside argparse it is a ValueError like any other bad input."""


def nm(text: str) -> tuple[int, int]:
    """"N:M" (e.g. "2:4") -> (n, m) with 1 <= n <= m; usable as argparse ``type=``.

    Raises :class:`OptionError` (a ValueError); argparse names the option in its message.
    """
    parts = text.split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise OptionError(f"must look like N:M (e.g. 2:4), got {text!r}")
    n, m = (int(p) for p in parts)
    if not 1 <= n <= m:
        raise OptionError(f"needs 1 <= N <= M, got {text!r}")
    return n, m


def key_values(items, option: str, convert=str) -> dict:
    """Repeatable ``KEY=VALUE`` strings -> {key: convert(value)}.

    items: the option's list (None when never given). option: its name for messages,
    e.g. "--param". Keys are stripped and "-" becomes "_" (``-o weight-decay=0.1`` names
    the keyword ``weight_decay``). A ValueError from ``convert`` is re-raised naming the
    option, the key and the value.
    """
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"{option} must look like KEY=VALUE, got {item!r}")
        try:
            out[key] = convert(value)
        except ValueError as exc:
            raise ValueError(f"{option} {key}: bad value {value!r} ({exc})") from None
    return out


def run_params(args: argparse.Namespace) -> dict:
    """The parsed options as a dict, without argparse internals (names starting with "_")."""
    return {k: v for k, v in vars(args).items() if not k.startswith("_")}
