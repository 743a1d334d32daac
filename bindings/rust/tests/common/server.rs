//! A `ferry-server` subprocess for the sync tests: the seeds' Item app (`examples/item-app`)
//! on a free port with a fresh data directory. The binary comes from `$FERRY_SERVER`, by
//! default `<repo>/build/ferry-server`. [`Server::start_with_admin`] also enables the admin
//! API (`FERRY_ADMIN_TOKEN`), called with [`Server::admin_post`].
#![allow(dead_code)]

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use ferry::{ClassSchema, Property, PropertyType, Schema};

use super::TempDir;

/// The seeds' Item schema as a device declares it (the server's `examples/item-app`).
pub fn item_schema() -> Schema {
    Schema::new([ClassSchema::new("Item")
        .property(Property::primary_key(PropertyType::ObjectId))
        .property(Property::new("ownerId", PropertyType::String))
        .property(Property::new("itemName", PropertyType::String))
        .property(Property::new("complexity", PropertyType::Int))])
    .unwrap()
}

pub const JWT_SIGNING_KEY: &str = "a-host-signing-key-of-at-least-32-bytes!";
/// The admin API's bearer token of a server from [`Server::start_with_admin`].
pub const ADMIN_TOKEN: &str = "an-admin-token-for-the-rust-tests";

pub fn repo_root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("..");
    root.canonicalize().unwrap_or(root)
}

/// The seeds' Item app configuration (`examples/item-app`).
pub fn item_app_dir() -> PathBuf {
    repo_root().join("examples").join("item-app")
}

// --- The server --------------------------------------------------------------------------------

/// A `ferry-server` subprocess, stopped with SIGTERM (then SIGKILL) and reaped on drop.
pub struct Server {
    child: Child,
    pub url: String,
    dir: TempDir,
}

impl Server {
    pub fn start() -> Server {
        Server::launch(false, None, None)
    }

    /// A server serving https and wss with this PEM certificate and key; its `url` is
    /// `https://127.0.0.1:<port>`.
    pub fn start_with_tls(certificate: &Path, key: &Path) -> Server {
        Server::launch(false, None, Some((certificate, key)))
    }

    /// A server whose admin API is enabled (`FERRY_ADMIN_TOKEN` = [`ADMIN_TOKEN`]), serving
    /// the app configuration in `app_dir` (default `examples/item-app`).
    pub fn start_with_admin(app_dir: Option<&Path>) -> Server {
        Server::launch(true, app_dir, None)
    }

    fn launch(admin: bool, app_dir: Option<&Path>, tls: Option<(&Path, &Path)>) -> Server {
        let binary = std::env::var_os("FERRY_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo_root().join("build").join("ferry-server"));
        let dir = TempDir::new("server");
        let data = dir.file("data");
        fs::create_dir_all(&data).unwrap();
        let port_file = dir.file("port");
        let log = fs::File::create(dir.file("server.log")).unwrap();
        let mut command = Command::new(&binary);
        if admin {
            command.env("FERRY_ADMIN_TOKEN", ADMIN_TOKEN);
        }
        if let Some((certificate, key)) = tls {
            command.arg("--tls-certificate").arg(certificate).arg("--tls-key").arg(key);
        }
        let child = command
            .env("jwtSigningKey", JWT_SIGNING_KEY)
            .arg("--app-dir")
            .arg(app_dir.map_or_else(item_app_dir, Path::to_path_buf))
            .arg("--data")
            .arg(&data)
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .args(["--log-level", "warning", "--weak-password-hashing-for-tests"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let mut server = Server { child, url: String::new(), dir };

        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            if let Ok(text) = fs::read_to_string(&port_file) {
                if let Ok(port) = text.trim().parse::<u16>() {
                    break port;
                }
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("ferry-server exited with {status} before listening:\n{}", server.log());
            }
            assert!(
                Instant::now() < deadline,
                "ferry-server did not listen within 30 s:\n{}",
                server.log()
            );
            thread::sleep(Duration::from_millis(20));
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        server.url = format!("{scheme}://127.0.0.1:{port}");
        server
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.file("server.log")).unwrap_or_default()
    }

    /// `POST /api/admin/v1/<path>` with the admin token (HTTP/1.1 over a plain TCP stream),
    /// panicking unless the answer is 2xx. Returns the body.
    pub fn admin_post(&self, path: &str) -> String {
        let host = self.url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(host).unwrap_or_else(|e| panic!("connect {host}: {e}"));
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
        let request = format!(
            "POST /api/admin/v1/{path} HTTP/1.1\r\nHost: {host}\r\n\
             Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let response = String::from_utf8_lossy(&response).into_owned();
        let status = response.lines().next().unwrap_or_default();
        let code = status.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok());
        assert!(
            status.starts_with("HTTP/1.") && matches!(code, Some(200..=299)),
            "POST {path}: {response}"
        );
        response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                _ => break,
            }
        }
        eprintln!("ferry-server did not stop on SIGTERM; killing it");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
