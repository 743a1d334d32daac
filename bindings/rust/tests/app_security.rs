//! The App's safe defaults (issue 22): certificates are verified unless the host sets
//! `insecure_skip_verify`, and plain http to a host that is not loopback is refused unless it
//! sets `allow_insecure_http`. The certificate tests run `ferry-server` with a self-signed
//! certificate made by `openssl req` (`$FERRY_SERVER`, default `<repo>/build/ferry-server`).

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::server::Server;
use common::TempDir;
use ferry::{App, AppOptions, Credentials, ErrorCode};

const APP_ID: &str = "item-app-seeds";
const TIMEOUT: Duration = Duration::from_secs(30);

fn options(url: &str, dir: &TempDir) -> AppOptions {
    AppOptions::new(APP_ID, url, dir.path())
}

#[test]
fn the_defaults_are_the_safe_values() {
    let o = AppOptions::default();
    assert!(!o.insecure_skip_verify && !o.allow_insecure_http);
}

#[test]
fn plain_http_to_another_host_needs_the_opt_in() {
    let dir = TempDir::new("http-opt-in");
    for url in ["http://example.com", "http://10.0.0.7:9090", "http://[2001:db8::1]:80"] {
        let error =
            App::new(options(url, &dir)).err().unwrap_or_else(|| panic!("{url} was accepted"));
        assert_eq!(error.code, ErrorCode::InvalidArgument, "{url}: {error:?}");
        assert!(error.message.contains("allow_insecure_http"), "{url}: {}", error.message);
        App::new(AppOptions { allow_insecure_http: true, ..options(url, &dir) })
            .unwrap_or_else(|e| panic!("{url} with the opt-in: {e:?}"));
    }
    for url in [
        "http://localhost:9",
        "http://127.0.0.1:9",
        "http://127.8.9.10:9",
        "http://[::1]:9",
        "https://example.com",
    ] {
        App::new(options(url, &dir)).unwrap_or_else(|e| panic!("{url}: {e:?}"));
    }
}

/// A self-signed certificate for 127.0.0.1 and localhost in `dir`: (certificate, key), or
/// None without the openssl command.
fn make_certificate(dir: &TempDir) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let (cert, key) = (dir.file("cert.pem"), dir.file("key.pem"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args([
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    status.success().then_some((cert, key))
}

#[test]
fn certificates_are_verified_unless_the_host_opts_out() {
    let dir = TempDir::new("tls");
    let Some((cert, key)) = make_certificate(&dir) else {
        eprintln!("SKIPPED: no openssl command to make a certificate");
        return;
    };
    let server = Server::start_with_tls(&cert, &key);
    assert!(server.url.starts_with("https://"), "{}", server.url);

    let d1 = TempDir::new("tls-default");
    let app = App::new(options(&server.url, &d1)).unwrap();
    let error = app
        .log_in(Credentials::Anonymous, TIMEOUT)
        .err()
        .expect("a self-signed certificate was accepted");
    assert!(matches!(error.code, ErrorCode::Network | ErrorCode::Io), "{error:?}");
    assert!(error.message.contains("certificate"), "{}", error.message);

    let d2 = TempDir::new("tls-skip");
    let app =
        App::new(AppOptions { insecure_skip_verify: true, ..options(&server.url, &d2) }).unwrap();
    app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();

    let d3 = TempDir::new("tls-trust");
    let app =
        App::new(AppOptions { ca_file: Some(cert.clone()), ..options(&server.url, &d3) }).unwrap();
    app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
}
