"""Requests to a URL that someone configured (a run's LLM monitor): never to this host, its
link-local neighbours or a cloud's metadata service, unless a setting allows that network.

A URL in a run configuration is chosen by an operator, not by whoever deploys Crucible. Sent from
a worker, a request to ``http://169.254.169.254/`` reads the cloud's instance credentials, one to
``127.0.0.1`` reaches services that trust local callers, and either carries the monitor's API
key. So the host is resolved and **every** address it resolves to is checked, when the
configuration is checked and again when each connection is made (the connection goes to the
address that was checked, so a name that resolves differently the second time gains nothing):
loopback, link-local, unspecified, multicast and reserved addresses, and the metadata services'
own addresses, are refused unless they lie in one of the allowed networks
(``CRUCIBLE_LLM_MONITOR_ALLOWED_NETWORKS``, CIDRs, e.g. ``127.0.0.0/8`` for a judge on this
host). Private networks (a judge in the cluster) are allowed. Redirects are not followed.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlparse

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# Instance metadata services (AWS, GCP, Azure, OpenStack: 169.254.169.254; AWS ECS task
# metadata; AWS over IPv6; Alibaba; Azure's wire server), refused even where link-local or
# shared address space would otherwise be allowed.
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "100.100.100.200",
        "168.63.129.16",
    )
)


class AddressRefused(ValueError):
    """A URL whose host is (or resolves to) an address requests may not reach."""


def networks(values: Iterable[str]) -> list[Network]:
    """CIDR strings (``127.0.0.0/8``, ``::1/128``) as networks.

    Raises:
        ValueError: one is not a network (named).
    """
    found = []
    for value in values:
        try:
            found.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(
                f"{value!r} is not a network (write a CIDR, e.g. 127.0.0.0/8)"
            ) from None
    return found


def address_problem(address: Address, allowed: Iterable[Network] = ()) -> str | None:
    """Why ``address`` may not be reached (``"loopback"``, ``"link-local"``, ``"a cloud
    metadata service"``...), or None."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    if any(address in network for network in allowed):
        return None
    if address in METADATA:
        return "a cloud metadata service"
    for problem, flag in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("unspecified", address.is_unspecified),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
    ):
        if flag:
            return problem
    return None


def resolve(host: str, port: int, allowed: Iterable[Network] = ()) -> list[tuple]:
    """``getaddrinfo`` of ``host:port`` (TCP), every address checked.

    Raises:
        AddressRefused: an address of ``host`` may not be reached (the host and the address
            named).
        OSError: the name does not resolve.
    """
    allowed = list(allowed)
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%", 1)[0])
        problem = address_problem(address, allowed)
        if problem:
            raise AddressRefused(
                f"{host} resolves to {address}, {problem}: refused (allow its network in "
                "CRUCIBLE_LLM_MONITOR_ALLOWED_NETWORKS if it is yours)"
            )
    return infos


def check_url(url: str, allowed: Iterable[Network] = ()) -> None:
    """Refuse ``url`` when its host is, or resolves to, an address that may not be reached; a
    name that does not resolve here passes (it is checked again at each connection).

    Raises:
        AddressRefused: see :func:`resolve`.
    """
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        resolve(parsed.hostname or "", port, allowed)
    except OSError:
        pass


def guarded_session(allowed: Iterable[Network] = ()):
    """A ``requests.Session`` whose every connection goes to an address :func:`resolve`
    checked (http and https; TLS still verifies the host's name)."""
    import requests  # noqa: PLC0415 (only processes that send requests load it)
    from requests.adapters import HTTPAdapter  # noqa: PLC0415
    from urllib3.connection import HTTPConnection, HTTPSConnection  # noqa: PLC0415
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool  # noqa: PLC0415
    from urllib3.exceptions import NewConnectionError  # noqa: PLC0415

    allowed = list(allowed)

    class Checked:
        def _new_conn(self):
            try:
                infos = resolve(self._dns_host, self.port, allowed)
            except AddressRefused as exc:
                raise NewConnectionError(self, str(exc)) from None
            except OSError as exc:
                raise NewConnectionError(
                    self, f"{self._dns_host} does not resolve: {exc}"
                ) from None
            last: OSError | None = None
            for family, kind, proto, _name, address in infos:
                sock = socket.socket(family, kind, proto)
                try:
                    sock.settimeout(self.timeout)
                    sock.connect(address)
                    return sock
                except OSError as exc:
                    sock.close()
                    last = exc
            raise NewConnectionError(self, f"Failed to establish a new connection: {last}")

    class CheckedHTTP(Checked, HTTPConnection):
        pass

    class CheckedHTTPS(Checked, HTTPSConnection):
        pass

    class HTTPPool(HTTPConnectionPool):
        ConnectionCls = CheckedHTTP

    class HTTPSPool(HTTPSConnectionPool):
        ConnectionCls = CheckedHTTPS

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": HTTPPool, "https": HTTPSPool}

    session = requests.Session()
    session.trust_env = False  # no proxy from the environment: the request goes where checked
    session.mount("http://", Adapter())
    session.mount("https://", Adapter())
    return session
