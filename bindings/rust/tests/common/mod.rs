//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ferry::{ClassSchema, Database, Delivery, ErrorCode, Options, Property, PropertyType, Schema};

/// How long to wait for a notification that must come.
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A name unique in this machine's run: pid, counter and a tag.
pub fn unique(tag: &str) -> String {
    format!("ferry-rs-{}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed), tag)
}

/// A fresh directory under the system temp directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let path = std::env::temp_dir().join(unique(tag));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `Item` (the benchmark's shape plus a few more types) and `Person` (string key, links).
pub fn classes() -> Vec<ClassSchema> {
    vec![
        ClassSchema::new("Item")
            .property(Property::primary_key(PropertyType::ObjectId))
            .property(Property::new("ownerId", PropertyType::String).indexed())
            .property(Property::new("itemName", PropertyType::String))
            .property(Property::new("complexity", PropertyType::Int).indexed())
            .property(Property::new("done", PropertyType::Bool))
            .property(Property::new("price", PropertyType::Double))
            .property(Property::new("note", PropertyType::String).optional())
            .property(Property::new("counter", PropertyType::Int).optional())
            .property(Property::new("blob", PropertyType::Binary))
            .property(Property::new("due", PropertyType::Timestamp).optional())
            .property(Property::new("ref", PropertyType::ObjectId).optional())
            .property(Property::new("uuid", PropertyType::Uuid).optional())
            .property(Property::new("tags", PropertyType::String).list())
            .property(Property::link("owner", "Person").optional()),
        ClassSchema::new("Person")
            .property(Property::primary_key(PropertyType::String))
            .property(Property::new("age", PropertyType::Int))
            .property(Property::link("friends", "Person").list()),
    ]
}

pub fn schema() -> Schema {
    Schema::new(classes()).expect("valid schema")
}

/// A fresh in-memory database with the test schema.
pub fn memory_db(delivery: Delivery) -> Database {
    let schema = schema();
    Database::open(&Options::in_memory(unique("mem")).schema(&schema).delivery(delivery))
        .expect("open in-memory database")
}

/// Asserts that `result` failed with `code`, and returns the message.
#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(result: ferry::Result<T>, code: ErrorCode) -> String {
    match result {
        Ok(v) => panic!("expected {code:?}, got Ok({v:?})"),
        Err(e) => {
            assert_eq!(e.code, code, "wrong code; message: {}", e.message);
            assert!(!e.message.is_empty(), "empty message for {code:?}");
            assert!(!e.message.contains("libferry did not record"), "{}", e.message);
            e.message
        }
    }
}

/// Asserts that `result` failed with one of `codes` (for cases the header leaves open).
#[track_caller]
pub fn expect_err_any<T: std::fmt::Debug>(
    result: ferry::Result<T>,
    codes: &[ErrorCode],
) -> ErrorCode {
    match result {
        Ok(v) => panic!("expected one of {codes:?}, got Ok({v:?})"),
        Err(e) => {
            assert!(codes.contains(&e.code), "expected one of {codes:?}, got {e}");
            e.code
        }
    }
}
pub mod server;
