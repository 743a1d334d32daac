"""The App's safe defaults (issue 22): certificates are verified unless the host passes
``insecure_skip_verify=True``, and plain http to a host that is not loopback is refused unless
it passes ``allow_insecure_http=True``. The certificate tests run ferry-server with a
self-signed certificate made by ``openssl req``."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

import ferry
from ferry import _native
from ferry.errors import check

from test_sync import APP_ID, T, run_server


def test_options_struct_matches_the_header() -> None:
    # ferry.h version 4: the opt-outs are appended after encryption_key (offset 120).
    assert _native.FERRY_APP_OPTIONS_VERSION == 4
    assert _native.AppOptions.reserved.offset == 40
    assert _native.AppOptions.encryption_key.offset == 120
    assert _native.AppOptions.insecure_skip_verify.offset == 128
    assert _native.AppOptions.allow_insecure_http.offset == 129
    assert ctypes.sizeof(_native.AppOptions) == 136


def test_init_leaves_the_opt_outs_off() -> None:
    opts = _native.AppOptions()
    check(_native.lib().ferry_app_options_init(ctypes.byref(opts), _native.FERRY_APP_OPTIONS_VERSION))
    assert not opts.insecure_skip_verify and not opts.allow_insecure_http


@pytest.mark.parametrize("url", ["http://example.com", "http://10.0.0.7:9090", "http://[2001:db8::1]:80",
                                 "http://localhost.example.com"])
def test_plain_http_to_another_host_needs_the_opt_in(tmp_path: Path, url: str) -> None:
    with pytest.raises(ferry.InvalidArgumentError, match="allow_insecure_http"):
        ferry.App(APP_ID, url, tmp_path)
    with ferry.App(APP_ID, url, tmp_path, allow_insecure_http=True) as app:
        assert app.base_url == url


@pytest.mark.parametrize("url", ["http://localhost:9", "http://127.0.0.1:9", "http://127.8.9.10:9", "http://[::1]:9",
                                 "https://example.com"])
def test_loopback_and_https_need_no_opt_in(tmp_path: Path, url: str) -> None:
    with ferry.App(APP_ID, url, tmp_path) as app:
        assert app.base_url == url


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """ferry-server serving https with a self-signed certificate for 127.0.0.1; yields its URL
    and the certificate."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate")
    work = tmp_path_factory.mktemp("ferry-tls-server")
    cert, key = work / "cert.pem", work / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    with run_server(work, tls=(cert, key)) as url:
        assert url.startswith("https://")
        yield url, cert


def test_certificates_are_verified_by_default(tls_server: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = tls_server
    with ferry.App(APP_ID, url, tmp_path) as app:
        with pytest.raises((ferry.NetworkError, ferry.FerryIOError), match="certificate"):
            app.log_in(ferry.Credentials.anonymous(), timeout=T)


def test_insecure_skip_verify_is_an_explicit_opt_out(tls_server: tuple[str, Path], tmp_path: Path) -> None:
    url, _ = tls_server
    with ferry.App(APP_ID, url, tmp_path, insecure_skip_verify=True) as app:
        assert app.log_in(ferry.Credentials.anonymous(), timeout=T).id


def test_a_trusted_certificate_logs_in(tls_server: tuple[str, Path], tmp_path: Path) -> None:
    url, cert = tls_server
    with ferry.App(APP_ID, url, tmp_path, ca_file=str(cert)) as app:
        assert app.log_in(ferry.Credentials.anonymous(), timeout=T).id
