"""TLS files that may change under a running process: a mounted Secret's certificate, key
and CA bundle, which kubelet swaps (through the volume's `..data` symlink) when
cert-manager or an operator updates the Secret.

`watch` gives the process's one `WatchedTls` for a set of paths: it reads and checks the
files at once (a TlsError names the flag), and its `check()` reads them again only when
their stat changed, keeping the last good `Material` while the new files do not make a
valid set (a half-written file, a certificate without its key yet): one warning naming
the paths, never the contents. `grpcsrv.ServerTls`/`ClientTls` build their credentials
from it; `tlsreload.ExpiryCollector` exports the certificates' notAfter for alerts.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes

log = logging.getLogger(__name__)

#: Files modified this recently are read again at the next check even if their stamp
#: did not change (see `WatchedTls._settled`).
RACY_SECONDS = 2.0
#: Per file: (device, inode, mtime in ns, size) following symlinks, or None when missing.
Stamp = tuple[tuple[int, int, int, int] | None, ...]


class TlsError(ValueError):
    """A certificate, key or CA file that cannot be used; the message names its flag."""


@dataclass(frozen=True)
class Paths:
    """The files of one side: `role` is "server" or "client"; the flags name them in
    errors. A client may have only a CA (or nothing: the system roots)."""

    role: str
    cert: str | None
    key: str | None
    ca: str | None
    flag_prefix: str

    def existing(self) -> tuple[str, ...]:
        return tuple(p for p in (self.cert, self.key, self.ca) if p)


@dataclass(frozen=True)
class Material:
    """One consistent, checked read of the files; `serial` and `not_after` (seconds since
    the epoch) are the leaf certificate's, None without one."""

    cert: bytes | None
    key: bytes | None = field(repr=False)  # never in a log or an assertion message
    ca: bytes | None
    serial: int | None = None
    not_after: float | None = None


def stamp(paths: Sequence[str]) -> Stamp:
    """What changes when a file is replaced: `os.stat` follows the `..data` symlink, so a
    kubelet swap shows as a new inode even when size and mtime match."""
    out: list[tuple[int, int, int, int] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _read_pem(path: str, *, flag: str, label: str) -> bytes:
    """The file's bytes, or a TlsError naming `flag` when it is unreadable or holds no PEM
    block of the `label` kind ("CERTIFICATE", "PRIVATE KEY")."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TlsError(f"{flag} {path}: cannot read: {exc.strerror or exc}") from None
    if not (b"-----BEGIN " in data and label.encode() + b"-----" in data):
        raise TlsError(f"{flag} {path}: not a PEM file with a {label} block")
    return data


def _pair(paths: Paths) -> tuple[bytes, bytes, x509.Certificate]:
    """The certificate chain and key, refused unless they parse and belong together (at
    startup rather than at the first handshake: gRPC reads the PEM lazily)."""
    assert paths.cert and paths.key
    f = paths.flag_prefix
    cert = _read_pem(paths.cert, flag=f"{f}cert", label="CERTIFICATE")
    key = _read_pem(paths.key, flag=f"{f}key", label="PRIVATE KEY")
    try:
        leaf = x509.load_pem_x509_certificates(cert)[0]
        private = serialization.load_pem_private_key(key, password=None)
        matches = _spki(leaf.public_key()) == _spki(private.public_key())
        reason = "the key is not the certificate's"
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        # Never the key's contents: only the paths and the parser's reason.
        matches, reason = False, str(exc) or type(exc).__name__
    if not matches:
        raise TlsError(
            f"{f}cert {paths.cert} / {f}key {paths.key}: not a certificate and its private "
            f"key ({reason})"
        )
    return cert, key, leaf


def _spki(public_key: PublicKeyTypes) -> bytes:
    der, spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return public_key.public_bytes(der, spki)


def _ca(path: str, *, flag: str) -> bytes:
    data = _read_pem(path, flag=flag, label="CERTIFICATE")
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise TlsError(f"{flag} {path}: not a PEM CA bundle ({exc})") from None
    return data


def read(paths: Paths) -> Material:
    """Read and check the files now; raises TlsError naming the flag."""
    cert = key = ca = None
    serial = not_after = None
    if paths.cert and paths.key:
        cert, key, leaf = _pair(paths)
        serial, not_after = leaf.serial_number, leaf.not_valid_after_utc.timestamp()
    if paths.ca:
        ca = _ca(paths.ca, flag=f"{paths.flag_prefix}ca")
    return Material(cert=cert, key=key, ca=ca, serial=serial, not_after=not_after)


class WatchedTls:
    """The files of `paths` and their last good `Material` (see the module docstring).
    `check` may run in gRPC's core threads (the server's certificate fetcher) and on the
    event loop at once: one reload at a time, the others get the current material."""

    def __init__(self, paths: Paths, *, wall_clock: Callable[[], float] = time.time) -> None:
        self.paths = paths
        self._files = paths.existing()
        self._wall = wall_clock
        before = stamp(self._files)
        self.current = read(paths)
        self._stamp = self._settled(before)
        self._refused: Stamp | None = None
        self._warned = ""
        self._lock = threading.Lock()
        #: How many times the files were read (for tests).
        self.reads = 1

    def check(self) -> Material:
        """The current material, read again first when the files changed (otherwise only
        three stats). Never raises: a failure keeps the current material."""
        if not self._lock.acquire(blocking=False):
            return self.current
        try:
            self._reload()
        except Exception:  # a bug must not break handshakes or channels: keep serving
            log.exception("TLS %s files %s: reload failed", self.paths.role, self._names())
        finally:
            self._lock.release()
        return self.current

    def _reload(self) -> None:
        now = stamp(self._files)
        if now in (self._stamp, self._refused):
            return
        self.reads += 1
        try:
            fresh = read(self.paths)
        except TlsError as exc:
            self._refused = self._settled(now)
            if str(exc) != self._warned:  # once per problem, not once per handshake
                self._warned = str(exc)
                log.warning(
                    "TLS %s files changed but cannot be used yet; keeping the current "
                    "ones: %s", self.paths.role, exc,
                )  # fmt: skip
            return
        if stamp(self._files) != now:
            return  # replaced while being read: read them again at the next check
        self._stamp, self._refused, self._warned = self._settled(now), None, ""
        if fresh == self.current:
            return  # touched or rewritten with the same contents
        self.current = fresh
        cas = fresh.ca.count(b"-----BEGIN CERTIFICATE-----") if fresh.ca else 0
        log.info(
            "TLS %s files %s reloaded: certificate serial %s, valid until %s; %d CA "
            "certificates trusted", self.paths.role, self._names(), _hex(fresh.serial),
            _when(fresh.not_after), cas,
        )  # fmt: skip

    def _settled(self, seen: Stamp) -> Stamp | None:
        """`seen`, or None (read again next time) while a file's mtime is within
        RACY_SECONDS: a rewrite in the same clock tick with the same size would otherwise
        leave the stamp unchanged (git's "racy clean" problem)."""
        newest = max((s[2] for s in seen if s is not None), default=0)
        return None if newest / 1e9 > self._wall() - RACY_SECONDS else seen

    def _names(self) -> str:
        return ", ".join(self._files) or "(none)"


def _hex(serial: int | None) -> str:
    return "-" if serial is None else f"{serial:X}"


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat()


_watched: dict[Paths, WatchedTls] = {}
_watched_lock = threading.Lock()


def watch(paths: Paths) -> WatchedTls:
    """The process's one `WatchedTls` for `paths` (every channel and server with the same
    files shares it); reads the files the first time, raising TlsError naming the flag."""
    with _watched_lock:
        found = _watched.get(paths)
        if found is None:
            found = _watched[paths] = WatchedTls(paths)
        return found


def watched() -> Iterator[WatchedTls]:
    with _watched_lock:
        yield from list(_watched.values())
