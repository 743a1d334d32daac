//! One sync agent per file, across processes. The test re-runs its own test binary as the
//! second process (the ignored `child_opens_synced` test, driven by an environment variable).

mod common;

use std::process::Command;

use common::*;
use ferry::{Database, ErrorCode, Options};

const CHILD_ENV: &str = "FERRY_RS_SYNC_AGENT_CHILD_PATH";

/// Opens the file named by CHILD_ENV as synced and prints the outcome for the parent.
#[test]
#[ignore = "run by a_second_process_cannot_be_the_sync_agent as a child process"]
fn child_opens_synced() {
    let Some(path) = std::env::var_os(CHILD_ENV) else { return };
    let schema = schema();
    match Database::open(&Options::path(path).schema(&schema).synced(true)) {
        Ok(_) => println!("CHILD-RESULT:ok"),
        Err(e) => println!("CHILD-RESULT:{:?}:{}", e.code, e.message),
    }
}

fn run_child(path: &std::path::Path) -> String {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_opens_synced", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, path)
        .output()
        .expect("run the child process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once("CHILD-RESULT:").map(|(_, result)| result))
        .unwrap_or_else(|| panic!("no result from the child: {stdout}"))
        .to_string()
}

#[test]
fn a_second_process_cannot_be_the_sync_agent() {
    let dir = TempDir::new("agent");
    let path = dir.file("synced.ferry");
    let schema = schema();

    let agent = Database::open(&Options::path(&path).schema(&schema).synced(true)).unwrap();
    // Handles within one process share the agent role.
    let second = Database::open(&Options::path(&path).schema(&schema)).unwrap();

    let result = run_child(&path);
    assert!(
        result.starts_with(&format!("{:?}:", ErrorCode::MultipleSyncAgents)),
        "child got {result}"
    );

    // Once this process has closed the file, another process may become the agent.
    drop(second);
    drop(agent);
    assert_eq!(run_child(&path), "ok");
}
