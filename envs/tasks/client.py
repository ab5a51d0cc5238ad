"""Tasks sent by a served env's clients (`toolgym serve env --allow-client-tasks`).

A client is hostile until bounded. Its task is data for fields the env names, never
server-side code (a "module:function" the server would import), never a file, and never
a loopback or private address. An env that takes client tasks overrides
`Env.client_task` with these helpers; the base class refuses them all (fail closed).
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import socket
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlsplit

from toolgym.errors import ConfigError

MAX_TEXT_CHARS = 20_000
"""The longest text a client task may hold in one field."""
MAX_LIST_ITEMS = 64


def only_fields(task: Mapping[str, Any], allowed: Collection[str], what: str) -> dict[str, Any]:
    """A copy of `task`, or a ConfigError naming the fields a client may not set."""
    extra = sorted(str(k)[:40] for k in task if k not in allowed)
    if extra:
        raise ConfigError(
            f"a client's {what} may set only {', '.join(sorted(allowed))}; "
            f"{', '.join(repr(k) for k in extra)} {'is' if len(extra) == 1 else 'are'} "
            "the server's to choose"
        )
    return dict(task)


def text(value: Any, field: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """A field that must be plain, valid text of bounded length."""
    if not isinstance(value, str):
        raise ConfigError(f"{field!r} is text, got {type(value).__name__}")
    if len(value) > max_chars:
        raise ConfigError(f"{field!r} holds {len(value)} characters (at most {max_chars})")
    if "\x00" in value:
        raise ConfigError(f"{field!r} holds a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{field!r} holds a lone surrogate: not valid Unicode") from None
    return value


def texts(value: Any, field: str, max_items: int = MAX_LIST_ITEMS) -> list[str]:
    """A list of texts (a task's accepted answers)."""
    if not isinstance(value, list) or not value or len(value) > max_items:
        raise ConfigError(f"{field!r} is a list of 1 to {max_items} texts")
    return [text(v, f"{field}[{i}]", 2000) for i, v in enumerate(value)]


def number(value: Any, field: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{field!r} is a finite number, got {str(value)[:40]!r}")
    return value


def public_url(value: Any, field: str = "url") -> str:
    """An http(s) URL whose host is neither loopback, private, link-local nor unspecified,
    by name or by any address it resolves to; a ConfigError otherwise. (A name may still
    resolve elsewhere when the browser looks it up later; an env that serves clients keeps
    its browser offline, where no such host is reachable at all.)"""
    url = text(value, field, 2000)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{field!r} must be an http(s) URL with a host; {parts.scheme or 'no'} scheme "
            "is not for clients (no file: or other local URLs)"
        )
    host = parts.hostname
    if host == "localhost" or host.endswith(".localhost"):
        raise ConfigError(f"{field!r} names a loopback host: not for clients")
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        addresses = set()  # unresolvable: the page will not load, which the episode reports
    with contextlib.suppress(ValueError):  # a literal address, whatever it resolves to
        addresses.add(str(ipaddress.ip_address(host)))
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_unspecified:
            raise ConfigError(
                f"{field!r} reaches {address}, a loopback or private address: not for clients"
            )
    return url
