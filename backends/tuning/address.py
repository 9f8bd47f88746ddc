"""A Dask scheduler's address (`compare tune --scheduler`), checked in one
place before Dask is asked to connect: its form (tcp://HOST:PORT or
tls://HOST:PORT, a port in 1-65535), and what listens there.

Dask's own client trusts the first bytes it reads: a listener that is not
a scheduler can make it wait for as long as the listener keeps the
connection, or ask for a buffer of whatever size the listener's first
eight bytes say (3 EiB was seen).  A scheduler speaks first, at once: its
handshake, a length-prefixed message of a few dozen bytes that names its
pickle protocol.  So `probe` opens a plain socket, reads that much within
a bound, and refuses in one line whatever is not it, naming the address
and what answered; only then does Dask connect.
"""
from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from nets.errors import UserError

SCHEMES = ("tcp", "tls")
DEFAULT_PORT = 8786         # `dask scheduler`'s own default
HANDSHAKE_MAX = 64 * 1024   # a scheduler's first message is about 60 bytes; a longer claim is not one
SAY_S = 10.0                # the longest a listener may take to speak first (a scheduler answers in a millisecond)


@dataclass(frozen=True)
class Address:
    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse(text: str) -> Address:
    """`text` as a scheduler's address, or a UserError naming what is wrong and the form it takes."""
    form = "tcp://HOST:PORT (a Dask scheduler's address, as `dask scheduler` prints it)"
    raw = (text or "").strip()
    if not raw:
        raise UserError(f"--scheduler is empty: give {form}")
    if "://" not in raw:
        raw = "tcp://" + raw
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:   # a port out of range or not a number
        raise UserError(f"--scheduler {text!r}: {exc}; give {form} with a port from 1 to 65535") from None
    if parts.scheme not in SCHEMES:
        raise UserError(f"--scheduler {text!r}: the scheme {parts.scheme!r} is not a Dask scheduler's; "
                        f"give {form} (tls:// for a TLS-secured one)")
    if not parts.hostname:
        raise UserError(f"--scheduler {text!r} names no host; give {form}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise UserError(f"--scheduler {text!r}: a scheduler's address has a host and a port only; give {form}")
    if port is None:
        raise UserError(f"--scheduler {text!r} names no port; give {form} (`dask scheduler` listens on "
                        f"{DEFAULT_PORT} unless told otherwise)")
    if not 1 <= port <= 65535:
        raise UserError(f"--scheduler {text!r}: port {port} is not one from 1 to 65535; give {form}")
    return Address(parts.scheme, parts.hostname, port)


def probe(address: Address, within_s: float) -> None:
    """None when a Dask scheduler answers at `address` within `within_s` seconds (at most SAY_S for it to
    speak once connected); else a UserError naming the address and what answered."""
    within_s = max(0.5, within_s)
    end = time.monotonic() + within_s
    try:
        sock = socket.create_connection((address.host, address.port), timeout=within_s)
    except socket.gaierror as exc:
        raise UserError(f"--scheduler {address}: the host {address.host!r} is not known ({exc.strerror}); "
                        f"check the name") from None
    except ConnectionRefusedError:
        raise UserError(f"--scheduler {address}: nothing listens there (connection refused); start one with "
                        f"`dask scheduler --port {address.port}`") from None
    except (TimeoutError, socket.timeout):
        raise UserError(f"--scheduler {address}: no answer within {within_s:.0f} s (unreachable, or a firewall "
                        f"drops the connection)") from None
    except OSError as exc:
        raise UserError(f"--scheduler {address}: cannot connect ({exc.strerror or exc})") from None
    if address.scheme == "tls":   # the handshake is inside TLS: the connection is all that can be seen
        sock.close()
        return
    with sock:
        head = _read(sock, 8, end)
        what = _what(head)
        if len(head) < 8:
            raise UserError(f"--scheduler {address}: something listens there but said "
                            + ("nothing" if not head else f"only {what}")
                            + f" within {min(within_s, SAY_S):.0f} s: not a Dask scheduler (which speaks "
                              f"first, at once); check the port")
        (size,) = struct.unpack("<Q", head)
        if not 0 < size <= HANDSHAKE_MAX:
            raise UserError(f"--scheduler {address}: the listener there is not a Dask scheduler (it began with "
                            f"{what}); check the port")
        body = _read(sock, size, end)
        if b"pickle-protocol" not in body:
            raise UserError(f"--scheduler {address}: the listener there is not a Dask scheduler (it sent "
                            f"{_what(head + body)}); check the port")


def _read(sock, n: int, end: float) -> bytes:
    """Up to `n` bytes, given up at `end` or after SAY_S, whichever is sooner."""
    out = b""
    stop = min(end, time.monotonic() + SAY_S)
    while len(out) < n:
        left = stop - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            got = sock.recv(n - len(out))
        except (TimeoutError, socket.timeout, OSError):
            break
        if not got:
            break
        out += got
    return out


def _what(data: bytes) -> str:
    text = data[:40]
    return repr(text) + ("..." if len(data) > 40 else "")
