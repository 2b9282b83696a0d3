"""Where the service may call out. A peer's callback must be an https URL whose host resolves
to public addresses only: checked when the peer is linked and again before every delivery,
and the delivery connects to the very address that was checked (a second lookup, which a
rebinding DNS could answer with a private address, is never made)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from app.platform.config import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class CallbackRefused(ValueError):
    """The callback URL may not be called; the message says why (no connection was made)."""


@dataclass(frozen=True, slots=True)
class CallbackTarget:
    """A checked callback: the URL with the checked address as its host, and what the
    request must carry so that the peer still sees its own name (Host, TLS server name)."""

    url: httpx.URL
    host_header: str
    extensions: dict[str, Any]


# IPv6 forms that carry an IPv4 address a router or translator may deliver to (so a literal
# in them can reach 169.254.169.254 or 127.0.0.1 whatever IPv6 says of the prefix), and the
# deprecated site-local range: never a callback's address, whatever the embedded address is.
_EMBEDDING_OR_DEPRECATED = tuple(
    ipaddress.IPv6Network(network)
    for network in (
        "::/96",  # IPv4-compatible (RFC 4291, deprecated)
        "::ffff:0:0/96",  # IPv4-mapped
        "::ffff:0:0:0/96",  # IPv4-translated (SIIT, RFC 2765)
        "64:ff9b::/96",  # NAT64 well-known prefix (RFC 6052)
        "64:ff9b:1::/48",  # NAT64 local-use prefix (RFC 8215)
        "2002::/16",  # 6to4 (RFC 3056)
        "2001::/32",  # Teredo (RFC 4380)
        "fec0::/10",  # site-local (RFC 3879, deprecated)
    )
)


def _embeds_ipv4(address: ipaddress.IPv6Address) -> bool:
    """An IPv6 address of a form that carries an IPv4 address, or of a deprecated range;
    ISATAP's interface identifier (`::0:5efe:a.b.c.d`, `::200:5efe:…`) in any prefix too."""
    if any(address in network for network in _EMBEDDING_OR_DEPRECATED):
        return True
    return (int(address) >> 32) & 0xFDFFFFFF == 0x00005EFE


def is_public(address: IPAddress) -> bool:
    """A globally routable unicast address; no IPv6 form that embeds an IPv4 address (mapped,
    compatible, translated, NAT64, 6to4, Teredo, ISATAP) nor a site-local one."""
    if isinstance(address, ipaddress.IPv6Address) and _embeds_ipv4(address):
        return False
    return address.is_global and not address.is_multicast


def _address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


class CallbackPolicy:
    """The rules for callback URLs, from the settings: https only unless `allow_http`;
    private or loopback addresses only for the hosts named in `private_hosts`; names
    resolved by the system, or through `static_hosts` alone when it is given (no DNS query:
    offline development and tests)."""

    def __init__(
        self,
        *,
        allow_http: bool = False,
        private_hosts: Iterable[str] = (),
        static_hosts: Mapping[str, list[str]] | None = None,
    ) -> None:
        self.allow_http = allow_http
        self.private_hosts = frozenset(host.lower().strip("[]") for host in private_hosts)
        self.static_hosts = (
            None
            if static_hosts is None
            else {name.lower(): list(addresses) for name, addresses in static_hosts.items()}
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> CallbackPolicy:
        """The policy the settings describe."""
        return cls(
            allow_http=settings.callback_allow_http,
            private_hosts=settings.callback_private_hosts,
            static_hosts=settings.callback_static_hosts,
        )

    def _parse(self, url: str) -> httpx.URL:
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, ValueError) as exc:
            raise CallbackRefused(f"not a URL: {exc}") from None
        schemes = ("https", "http") if self.allow_http else ("https",)
        if parsed.scheme not in schemes:
            raise CallbackRefused(
                "a callback must be an https URL"
                if not self.allow_http
                else "a callback must be an http or https URL"
            )
        if not parsed.host:
            raise CallbackRefused("the URL names no host")
        if parsed.userinfo:
            raise CallbackRefused("the URL may not carry a user name or password")
        return parsed

    async def _resolve(self, host: str, port: int) -> list[str]:
        literal = _address(host)
        if literal is not None:
            return [str(literal)]
        if self.static_hosts is not None:
            addresses = self.static_hosts.get(host)
            if not addresses:
                raise CallbackRefused(f"the host {host!r} does not resolve")
            return addresses
        try:
            found = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except (OSError, UnicodeError) as exc:
            raise CallbackRefused(f"the host {host!r} does not resolve ({exc})") from None
        return list(dict.fromkeys(str(entry[4][0]) for entry in found))

    async def check(self, url: str) -> CallbackTarget:
        """The callback's checked target, or CallbackRefused naming the rule it breaks."""
        parsed = self._parse(url)
        host = parsed.host.lower()
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        addresses = await self._resolve(host, port)
        checked = [_address(address) for address in addresses]
        if any(address is None for address in checked):
            raise CallbackRefused(f"the host {host!r} resolves to something not an address")
        if host not in self.private_hosts:
            private = [str(a) for a in checked if a is not None and not is_public(a)]
            if private:
                raise CallbackRefused(
                    f"the host {host!r} resolves to a private, loopback or reserved address "
                    f"({', '.join(private)}); callbacks go to public addresses only"
                )
        pinned = str(checked[0])
        extensions: dict[str, Any] = {}
        if parsed.scheme == "https" and _address(host) is None:
            extensions["sni_hostname"] = host
        return CallbackTarget(
            url=parsed.copy_with(host=pinned),
            host_header=parsed.netloc.decode("ascii"),
            extensions=extensions,
        )
