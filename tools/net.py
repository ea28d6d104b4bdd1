"""Outbound HTTP that connects to the address it vetted (no DNS rebinding).

Checking a URL with one DNS lookup and then letting the HTTP client resolve the name again
lets a rebinding resolver answer a public address to the check and ``127.0.0.1`` to the
connection. Here the name is resolved once, every address is vetted, and the connection goes
to the vetted address itself; the request keeps the name in its ``Host`` header and, for
HTTPS, in the TLS SNI and the certificate check (httpcore's ``sni_hostname``).

Used by callbacks (``harness.webhooks``: only public addresses, unless allow-listed) and HTTP
tools (``tools.http_tools``: internal services are allowed, link-local and other special
addresses — e.g. the cloud metadata address ``169.254.169.254`` — are not).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# IPv6 forms that carry an IPv4 address (``[::127.0.0.1]``, ``[::ffff:127.0.0.1]``, NAT64,
# 6to4, Teredo): a check of the IPv6 address says nothing about the IPv4 one it reaches.
IPV4_EMBEDDING_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "::/96",  # IPv4-compatible (deprecated), also :: and ::1
        "::ffff:0:0/96",  # IPv4-mapped
        "::ffff:0:0:0/96",  # IPv4-translated
        "64:ff9b::/96",  # NAT64
        "64:ff9b:1::/48",  # local NAT64
        "2002::/16",  # 6to4
        "2001::/32",  # Teredo
    )
)


class UnsafeAddress(Exception):
    """The URL's host may not be connected to; ``why`` says which rule refused it."""

    def __init__(self, host: str, why: str) -> None:
        super().__init__(f"{host}: {why}")
        self.host = host
        self.why = why


@dataclass(frozen=True)
class AddressPolicy:
    """Which resolved addresses a connection may go to.

    ``public_only``: only globally routable addresses (callbacks). Otherwise private and
    loopback addresses are fine (internal services), but link-local, multicast, unspecified
    and reserved ones are not. ``allowed`` networks pass whatever they are. IPv6 forms that
    embed an IPv4 address are refused unless allow-listed.
    """

    public_only: bool
    allowed: tuple[Network, ...] = ()

    @classmethod
    def of(cls, public_only: bool, allowed: Iterable[str]) -> AddressPolicy:
        return cls(public_only, tuple(ipaddress.ip_network(n, strict=False) for n in allowed))

    def refusal(self, address: IPAddress) -> str | None:
        """Why ``address`` is refused, or ``None`` if it may be connected to."""
        if any(address in network for network in self.allowed):
            return None
        if isinstance(address, ipaddress.IPv6Address):
            if address.scope_id:
                return f"it resolves to a scoped IPv6 address ({address})"
            embeds = any(address in network for network in IPV4_EMBEDDING_NETWORKS)
            if embeds and not (address.is_loopback or address.is_unspecified):
                return f"it resolves to an IPv6 address that embeds an IPv4 address ({address})"
        if self.public_only:
            if not address.is_global:
                return f"it resolves to a non-public address ({address})"
            return None
        if (
            address.is_link_local
            or address.is_multicast
            or address.is_unspecified
            or address.is_reserved
        ):
            return f"it resolves to a link-local, multicast or reserved address ({address})"
        return None


def ascii_host(host: str) -> str:
    """The host name as DNS sends it (IDNA), or ``UnsafeAddress`` if it cannot be one."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return host
    try:
        encoded = host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise UnsafeAddress(host, "it is not a valid host name") from exc
    if len(encoded) > 253 or any(len(label) > 63 for label in encoded.split(".")):
        raise UnsafeAddress(host, "it is not a valid host name")
    return encoded


def resolve_address(host: str, port: int, policy: AddressPolicy) -> IPAddress:
    """Resolve ``host`` once and vet every address; the address to connect to."""
    name = ascii_host(host)
    try:
        infos = socket.getaddrinfo(name, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise UnsafeAddress(host, "it does not resolve") from exc
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        why = policy.refusal(address)
        if why:
            raise UnsafeAddress(host, why)
        addresses.append(address)
    if not addresses:
        raise UnsafeAddress(host, "it does not resolve")
    return addresses[0]


class PinnedTransport(httpx.BaseTransport):
    """An httpx transport that resolves and vets each request's host, then connects to that
    very address. One pool per host name, so a connection whose TLS session was verified
    for one name is never reused for another name on the same address."""

    MAX_HOSTS = 256

    def __init__(self, policy: AddressPolicy, **transport_options: Any) -> None:
        self.policy = policy
        self._options = transport_options
        self._pools: dict[str, httpx.HTTPTransport] = {}
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        address = resolve_address(host, port, self.policy)
        extensions = dict(request.extensions)
        if request.url.scheme == "https":
            extensions["sni_hostname"] = ascii_host(host)
        request.extensions = extensions
        # The Host header was set from the name when the request was built; only the
        # address the connection goes to changes.
        request.url = request.url.copy_with(host=str(address))
        return self._pool(host).handle_request(request)

    def _pool(self, host: str) -> httpx.HTTPTransport:
        with self._lock:
            pool = self._pools.get(host)
            if pool is None:
                if len(self._pools) >= self.MAX_HOSTS:
                    self._pools.pop(next(iter(self._pools))).close()
                pool = self._pools[host] = httpx.HTTPTransport(**self._options)
            return pool

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()
