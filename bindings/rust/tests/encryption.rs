//! Encryption at rest: a 64-byte key encrypts the file and its WAL, a wrong or missing key and
//! a changed page are `ErrorCode::Decrypt`, files convert both ways (docs/encryption.md).

mod common;

use common::*;
use ferry::{Database, ErrorCode, ObjectId, Options};

const MARKER: &str = "rust-plaintext-marker-0b7d";

fn key(seed: u8) -> [u8; 64] {
    let mut k = [0u8; 64];
    for (i, b) in k.iter_mut().enumerate() {
        *b = seed.wrapping_mul(31).wrapping_add(i as u8);
    }
    k
}

fn fill(db: &Database, count: usize) {
    db.write(|tx| {
        for i in 0..count {
            tx.create(
                "Item",
                &[
                    ("_id", ObjectId::generate().into()),
                    ("itemName", format!("{MARKER}-{i}").into()),
                ],
            )?;
        }
        Ok(())
    })
    .unwrap();
}

fn contains(path: &std::path::Path, needle: &str) -> bool {
    let data = std::fs::read(path).unwrap_or_default();
    data.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn encrypted_file_holds_no_plaintext_and_reopens_with_its_key() {
    let dir = TempDir::new("enc");
    let path = dir.file("enc.ferry");
    let schema = schema();
    let k = key(1);
    {
        let db = Database::open(&Options::path(&path).schema(&schema).encryption_key(&k)).unwrap();
        fill(&db, 100);
        assert!(!contains(&dir.file("enc.ferry-wal"), MARKER));
    }
    assert!(!contains(&path, MARKER));
    assert!(!contains(&path, "SQLite format 3"));
    let db = Database::open(&Options::path(&path).encryption_key(&k)).unwrap();
    assert_eq!(db.query("Item", "TRUEPREDICATE", &[]).unwrap().len(), 100);
    // The key never shows in Debug output.
    let debug = format!("{:?}", Options::path(&path).encryption_key(&k));
    assert!(debug.contains("<64-byte encryption key>"), "{debug}");
}

#[test]
fn wrong_missing_and_unneeded_keys_are_decrypt_errors() {
    let dir = TempDir::new("keys");
    let path = dir.file("enc.ferry");
    let schema = schema();
    drop(Database::open(&Options::path(&path).schema(&schema).encryption_key(&key(1))).unwrap());
    let message = expect_err(
        Database::open(&Options::path(&path).encryption_key(&key(2))),
        ErrorCode::Decrypt,
    );
    assert!(message.contains("key does not decrypt"), "{message}");
    let message = expect_err(Database::open(&Options::path(&path)), ErrorCode::Decrypt);
    assert!(message.contains("is encrypted"), "{message}");
    let plain = dir.file("plain.ferry");
    drop(Database::open(&Options::path(&plain).schema(&schema)).unwrap());
    expect_err(Database::open(&Options::path(&plain).encryption_key(&key(1))), ErrorCode::Decrypt);
    assert_eq!(ErrorCode::from_raw(-25), ErrorCode::Decrypt);
}

#[test]
fn changed_page_is_an_error() {
    let dir = TempDir::new("tamper");
    let path = dir.file("tamper.ferry");
    let schema = schema();
    let k = key(3);
    {
        let db = Database::open(&Options::path(&path).schema(&schema).encryption_key(&k)).unwrap();
        fill(&db, 1000);
    }
    let mut data = std::fs::read(&path).unwrap();
    let mut offset = 4096 + 700;
    while offset < data.len() {
        data[offset] ^= 0x10;
        offset += 4096;
    }
    std::fs::write(&path, data).unwrap();
    let result = Database::open(&Options::path(&path).encryption_key(&k))
        .and_then(|db| db.query("Item", "TRUEPREDICATE", &[]).map(|r| r.len()));
    expect_err(result, ErrorCode::Decrypt);
}

#[test]
fn change_key_converts_both_ways() {
    let dir = TempDir::new("convert");
    let path = dir.file("convert.ferry");
    let schema = schema();
    {
        let db = Database::open(&Options::path(&path).schema(&schema)).unwrap();
        fill(&db, 20);
    }
    assert!(contains(&path, MARKER));
    Database::change_key(&path, None, Some(&key(4))).unwrap();
    assert!(!contains(&path, MARKER));
    expect_err(Database::change_key(&path, Some(&key(5)), None), ErrorCode::Decrypt);
    Database::change_key(&path, Some(&key(4)), None).unwrap();
    assert!(contains(&path, MARKER));
    let db = Database::open(&Options::path(&path)).unwrap();
    assert_eq!(db.query("Item", "TRUEPREDICATE", &[]).unwrap().len(), 20);
}

#[test]
fn app_user_cache_is_encrypted_with_the_app_key() {
    use ferry::{App, AppOptions};
    let dir = TempDir::new("appkey");
    let options = |key: Option<[u8; 64]>| AppOptions {
        encryption_key: key,
        ..AppOptions::new("enc-app", "http://127.0.0.1:9", dir.path())
    };
    // No server needed: creating the App opens (and creates) its user cache.
    drop(App::new(options(Some(key(6)))).unwrap());
    let cache = std::fs::read(dir.file("ferry-users.sqlite")).unwrap();
    assert!(!cache.is_empty() && !cache.starts_with(b"SQLite format 3"));
    expect_err(App::new(options(None)), ErrorCode::Decrypt);
    expect_err(App::new(options(Some(key(7)))), ErrorCode::Decrypt);
    assert!(!format!("{:?}", options(Some(key(6)))).contains("encryption_key: Some(["));
    drop(App::new(options(Some(key(6)))).unwrap());
}
