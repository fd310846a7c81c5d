"""Which network addresses a model-chosen URL may reach (sans-IO).

Every address a host name resolves to is classified; ``webfetch`` connects only to an
address it checked (so a second, different DNS answer cannot slip in between the check
and the connection). Link-local and cloud-metadata addresses are always refused;
private (and shared, carrier-grade NAT) ranges only when configured; loopback only when
configured. IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4, Teredo) are
judged by the IPv4 address they carry.
"""

from __future__ import annotations

import ipaddress
from typing import Final, Literal, TypeAlias

import msgspec

__all__ = ["AddressKind", "AddressPolicy", "address_kind", "refusal"]

AddressKind: TypeAlias = Literal[
    "public", "loopback", "private", "link_local", "metadata", "unspecified", "reserved"
]
IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

_METADATA: Final = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
        "169.254.170.2",  # AWS ECS task metadata
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "fd00:ec2::254",  # AWS over IPv6
    )
)
_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")
_SHARED: Final = ipaddress.ip_network("100.64.0.0/10")


class AddressPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """What ``webfetch`` may connect to besides public addresses (config ``webfetch``)."""

    allow_loopback: bool = False
    allow_private: bool = False


def _embedded(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return address


def address_kind(text: str) -> AddressKind:
    """Classify one numeric address (``ValueError`` when *text* is not one)."""
    address = _embedded(ipaddress.ip_address(text.split("%", 1)[0]))
    if address in _METADATA:
        return "metadata"
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link_local"
    if address.is_multicast or address.is_reserved:
        return "reserved"
    if address in _SHARED or address.is_private:
        return "private"
    if not address.is_global:
        return "reserved"
    return "public"


def refusal(text: str, policy: AddressPolicy) -> str | None:
    """Why *policy* refuses connecting to address *text*, or ``None`` when it may."""
    kind = address_kind(text)
    if kind == "public":
        return None
    if kind == "loopback" and policy.allow_loopback:
        return None
    if kind == "private" and policy.allow_private:
        return None
    reasons = {
        "loopback": "a loopback address (allowed only when webfetch.allow_loopback is set)",
        "private": "a private address (allowed only when webfetch.allow_private is set)",
        "link_local": "a link-local address",
        "metadata": "a cloud metadata address",
        "unspecified": "an unspecified address",
        "reserved": "a reserved or multicast address",
    }
    return reasons[kind]
