//! A `ferry-server` subprocess for the sync tests: the seeds' Item app (`examples/item-app`)
//! on a free port with a fresh data directory. The binary comes from `$FERRY_SERVER`, by
//! default `<repo>/build/ferry-server`.
#![allow(dead_code)]

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::TempDir;

pub const JWT_SIGNING_KEY: &str = "a-host-signing-key-of-at-least-32-bytes!";

pub fn repo_root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("..");
    root.canonicalize().unwrap_or(root)
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
        let binary = std::env::var_os("FERRY_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo_root().join("build").join("ferry-server"));
        let dir = TempDir::new("server");
        let data = dir.file("data");
        fs::create_dir_all(&data).unwrap();
        let port_file = dir.file("port");
        let log = fs::File::create(dir.file("server.log")).unwrap();
        let child = Command::new(&binary)
            .env("jwtSigningKey", JWT_SIGNING_KEY)
            .arg("--app-dir")
            .arg(repo_root().join("examples").join("item-app"))
            .arg("--data")
            .arg(&data)
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .args(["--log-level", "warning"])
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
        server.url = format!("http://127.0.0.1:{port}");
        server
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.file("server.log")).unwrap_or_default()
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
