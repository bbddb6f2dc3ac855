"""Reloading TLS files without a network (`tlsfiles.WatchedTls`, the server's certificate
fetcher and the expiry gauge): replaced files are taken with one INFO line; unchanged
files are not read again; a mismatched pair, a half-written file or a bug keep the old
material with one warning naming the paths (never the contents); kubelet's `..data`
symlink swap is seen even when size and mtime match; a file rewritten within the same
clock tick is read again."""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import grpc
import pytest

from splitsched.runtime import grpcsrv, tlsfiles, tlsreload
from tests.support import certs

LATER = 1e12  # a wall clock long after every file's mtime: no file counts as just written


def server_paths(d: Path, who: str = "scheduler") -> tlsfiles.Paths:
    return tlsfiles.Paths(
        role="server",
        cert=str(d / f"{who}.crt"),
        key=str(d / f"{who}.key"),
        ca=str(d / "ca.crt"),
        flag_prefix="--tls-",
    )


def watched(paths: tlsfiles.Paths) -> tlsfiles.WatchedTls:
    return tlsfiles.WatchedTls(paths, wall_clock=lambda: LATER)


@pytest.fixture
def stack_dir(tmp_path: Path) -> tuple[Path, dict[str, certs.Issued]]:
    return tmp_path, certs.write_stack_certs(tmp_path)


def assert_no_secrets(text: str) -> None:
    assert "BEGIN" not in text and "PRIVATE" not in text


def test_unchanged_files_are_not_read_again(
    stack_dir: tuple[Path, dict[str, certs.Issued]],
) -> None:
    d, _ = stack_dir
    files = watched(server_paths(d))
    first = files.check()
    for _ in range(5):
        assert files.check() is first
    assert files.reads == 1


def test_replaced_files_are_taken_with_one_info_line(
    stack_dir: tuple[Path, dict[str, certs.Issued]], caplog: pytest.LogCaptureFixture
) -> None:
    d, issued = stack_dir
    files = watched(server_paths(d))
    assert files.current.serial == issued["scheduler"].cert.serial_number
    new = certs.issue(issued["ca"], d, name="scheduler", common_name="splitsched-scheduler")
    with caplog.at_level(logging.INFO, logger=tlsfiles.__name__):
        taken = files.check()
        assert files.check() is taken
    assert taken.serial == new.cert.serial_number != issued["scheduler"].cert.serial_number
    assert taken.not_after == new.cert.not_valid_after_utc.timestamp()
    [line] = [r.getMessage() for r in caplog.records]
    assert f"{new.cert.serial_number:X}" in line and str(d / "scheduler.crt") in line
    assert_no_secrets(caplog.text)


def test_a_mismatched_pair_keeps_the_old_one_and_warns_once(
    stack_dir: tuple[Path, dict[str, certs.Issued]], caplog: pytest.LogCaptureFixture
) -> None:
    """The certificate is replaced before its key (an operator copying files one by one)."""
    d, issued = stack_dir
    files = watched(server_paths(d))
    old = files.current
    new = certs.issue(issued["ca"], d / "new", name="scheduler", common_name="x")
    shutil.copyfile(new.cert_path, d / "scheduler.crt")
    with caplog.at_level(logging.INFO, logger=tlsfiles.__name__):
        for _ in range(3):
            assert files.check() is old
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    assert str(d / "scheduler.crt") in warning.getMessage()
    assert str(d / "scheduler.key") in warning.getMessage()
    assert files.reads == 2  # the refused files are not read again until they change
    assert_no_secrets(caplog.text)

    shutil.copyfile(new.key_path, d / "scheduler.key")
    assert files.check().serial == new.cert.serial_number


def test_a_half_written_file_keeps_the_old_one(
    stack_dir: tuple[Path, dict[str, certs.Issued]], caplog: pytest.LogCaptureFixture
) -> None:
    d, _ = stack_dir
    files = watched(server_paths(d))
    old = files.current
    crt = d / "scheduler.crt"
    whole = crt.read_bytes()
    crt.write_bytes(whole[:200])
    with caplog.at_level(logging.WARNING, logger=tlsfiles.__name__):
        assert files.check() is old
        crt.write_bytes(whole)
        (d / "ca.crt").write_text("")  # an empty CA bundle: refused too
        assert files.check() is old
    first, second = (r.getMessage() for r in caplog.records)
    assert "--tls-cert" in first and str(crt) in first
    assert "--tls-ca" in second and str(d / "ca.crt") in second
    assert_no_secrets(caplog.text)


def test_an_exception_while_reloading_keeps_the_old_one(
    stack_dir: tuple[Path, dict[str, certs.Issued]],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    d, issued = stack_dir
    files = watched(server_paths(d))
    old = files.current

    def broken(paths: tlsfiles.Paths) -> tlsfiles.Material:
        raise RuntimeError("a bug")

    monkeypatch.setattr(tlsfiles, "read", broken)
    certs.issue(issued["ca"], d, name="scheduler", common_name="splitsched-scheduler")
    with caplog.at_level(logging.ERROR, logger=tlsfiles.__name__):
        assert files.check() is old
    assert "reload failed" in caplog.text


def kubelet_volume(root: Path, source: Path, version: str) -> None:
    """A Secret volume as kubelet lays it out: tls.crt -> ..data/tls.crt, ..data -> a
    timestamped directory; a new version is swapped in by renaming a new ..data link."""
    target = root / f"..{version}"
    target.mkdir()
    for name, src in (("tls.crt", "scheduler.crt"), ("tls.key", "scheduler.key")):
        shutil.copyfile(source / src, target / name)
        os.utime(target / name, ns=(1_000_000_000, 1_000_000_000))  # the same mtime each time
        if not (root / name).is_symlink():
            (root / name).symlink_to(Path("..data") / name)
    tmp = root / "..data_tmp"
    tmp.symlink_to(target.name)
    os.replace(tmp, root / "..data")


def test_a_kubelet_symlink_swap_is_seen(tmp_path: Path) -> None:
    first, second, volume = tmp_path / "a", tmp_path / "b", tmp_path / "volume"
    volume.mkdir()
    a = certs.write_stack_certs(first)
    b = certs.write_stack_certs(second)
    kubelet_volume(volume, first, "2026_11_27_01")
    paths = tlsfiles.Paths("server", str(volume / "tls.crt"), str(volume / "tls.key"), None, "-")
    files = watched(paths)
    assert files.current.serial == a["scheduler"].cert.serial_number
    assert files.check() is files.current
    kubelet_volume(volume, second, "2026_11_27_02")
    assert files.check().serial == b["scheduler"].cert.serial_number


def test_a_file_written_just_now_is_read_again_until_it_settles(
    stack_dir: tuple[Path, dict[str, certs.Issued]],
) -> None:
    """A rewrite in the same clock tick with the same size leaves the stamp unchanged, so
    a file younger than RACY_SECONDS is read again (without a new certificate taken)."""
    d, _ = stack_dir
    now = [time.time()]
    files = tlsfiles.WatchedTls(server_paths(d), wall_clock=lambda: now[0])
    first = files.check()
    assert files.check() is first and files.reads == 3
    now[0] += tlsfiles.RACY_SECONDS + 1
    files.check()
    files.check()
    assert files.reads == 4 and files.current is first


def test_the_server_fetcher_gives_grpc_only_what_changed(
    stack_dir: tuple[Path, dict[str, certs.Issued]],
) -> None:
    d, issued = stack_dir
    files = watched(server_paths(d))
    fetch = grpcsrv._certificate_fetcher(files, files.current)
    assert fetch() is None
    certs.issue(issued["ca"], d, name="scheduler", common_name="splitsched-scheduler")
    assert isinstance(fetch(), grpc.ServerCertificateConfiguration)
    assert fetch() is None


def test_the_expiry_gauge_has_the_soonest_certificate_per_role(
    stack_dir: tuple[Path, dict[str, certs.Issued]], monkeypatch: pytest.MonkeyPatch
) -> None:
    d, issued = stack_dir
    monkeypatch.setattr(tlsfiles, "_watched", {})
    tlsfiles.watch(server_paths(d))
    tlsfiles.watch(tlsfiles.Paths("client", None, None, str(d / "ca.crt"), "--peer-tls-"))
    [family] = tlsreload.ExpiryCollector().collect()
    assert [(s.labels, s.value) for s in family.samples] == [
        ({"role": "server"}, issued["scheduler"].cert.not_valid_after_utc.timestamp())
    ]  # a client without a certificate of its own has no expiry
