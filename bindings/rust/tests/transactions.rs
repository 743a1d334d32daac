//! Write transactions: commit, cancel, errors inside `write`, nesting, history.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use common::*;
use ferry::{Database, Delivery, Error, ErrorCode, ObjectId, Options};

fn count(db: &Database) -> usize {
    db.query("Item", "TRUEPREDICATE", &[]).unwrap().len()
}

#[test]
fn write_commits_on_ok_and_returns_the_value() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    let got = db
        .write(|tx| {
            assert!(tx.is_in_transaction()?);
            tx.create("Item", &[("_id", id.into())])?;
            Ok(42)
        })
        .unwrap();
    assert_eq!(got, 42);
    assert!(!db.is_in_transaction().unwrap());
    assert_eq!(count(&db), 1);
    assert_eq!(db.history_count().unwrap(), 1);
}

#[test]
fn write_cancels_on_err() {
    let db = memory_db(Delivery::Loop);
    let result: ferry::Result<()> = db.write(|tx| {
        tx.create("Item", &[("_id", ObjectId::generate().into())])?;
        Err(Error::new(ErrorCode::InvalidArgument, "changed my mind"))
    });
    let e = result.unwrap_err();
    assert_eq!(e.message, "changed my mind");
    assert!(!db.is_in_transaction().unwrap());
    assert_eq!(count(&db), 0);
    assert_eq!(db.history_count().unwrap(), 0);
}

#[test]
fn a_failing_write_inside_cancels_the_whole_transaction() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    db.write(|tx| tx.create("Item", &[("_id", id.into())])).unwrap();
    let result = db.write(|tx| {
        tx.create("Item", &[("_id", ObjectId::generate().into())])?; // fine
        tx.create("Item", &[("_id", id.into())]) // duplicate: Err, so all is cancelled
    });
    expect_err(result, ErrorCode::DuplicatePrimaryKey);
    assert_eq!(count(&db), 1);
}

#[test]
fn nested_begin_is_an_error_and_cancels_the_outer_write() {
    let db = memory_db(Delivery::Loop);
    let result = db.write(|tx| {
        tx.create("Item", &[("_id", ObjectId::generate().into())])?;
        let inner = tx.begin_write()?; // AlreadyInTransaction
        inner.commit()
    });
    expect_err(result, ErrorCode::AlreadyInTransaction);
    assert!(!db.is_in_transaction().unwrap());
    assert_eq!(count(&db), 0);

    // Another handle on this thread while this one has a transaction: waiting would deadlock.
    let schema = schema();
    let dir = TempDir::new("nested");
    let path = dir.file("n.ferry");
    let a = Database::open(&Options::path(&path).schema(&schema)).unwrap();
    let b = Database::open(&Options::path(&path).schema(&schema)).unwrap();
    let tx = a.begin_write().unwrap();
    expect_err(b.begin_write(), ErrorCode::AlreadyInTransaction);
    tx.cancel().unwrap();
    b.write(|_| Ok(())).unwrap();
}

#[test]
fn explicit_begin_commit_cancel() {
    let db = memory_db(Delivery::Loop);
    let tx = db.begin_write().unwrap();
    tx.create("Item", &[("_id", ObjectId::generate().into())]).unwrap();
    tx.cancel().unwrap();
    assert_eq!(count(&db), 0);

    let tx = db.begin_write().unwrap();
    tx.create("Item", &[("_id", ObjectId::generate().into())]).unwrap();
    tx.commit().unwrap();
    assert_eq!(count(&db), 1);

    // Dropping an unfinished transaction cancels it.
    {
        let tx = db.begin_write().unwrap();
        tx.create("Item", &[("_id", ObjectId::generate().into())]).unwrap();
    }
    assert!(!db.is_in_transaction().unwrap());
    assert_eq!(count(&db), 1);
}

#[test]
fn a_panic_inside_write_cancels() {
    let db = memory_db(Delivery::Loop);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        db.write(|tx| {
            tx.create("Item", &[("_id", ObjectId::generate().into())])?;
            panic!("boom");
            #[allow(unreachable_code)]
            Ok(())
        })
    }));
    assert!(outcome.is_err());
    assert!(!db.is_in_transaction().unwrap());
    assert_eq!(count(&db), 0);
}

#[test]
fn a_transaction_may_be_committed_from_another_thread() {
    let db = Arc::new(memory_db(Delivery::Loop));
    let id = ObjectId::generate();
    std::thread::scope(|s| {
        let tx = db.begin_write().unwrap();
        tx.create("Item", &[("_id", id.into())]).unwrap();
        s.spawn(move || tx.commit().unwrap()).join().unwrap();
    });
    assert!(db.get("Item", id).unwrap().is_some());
    // The commit on the other thread ended the transaction: this thread may begin again.
    db.write(|tx| tx.delete("Item", id)).unwrap();
}

#[test]
fn commit_and_cancel_without_a_transaction() {
    let db = memory_db(Delivery::Loop);
    let tx = db.begin_write().unwrap();
    // Cancel through the raw API behind the guard's back, then the guard finds none.
    assert_eq!(unsafe { ferry::sys::ferry_db_cancel(db.as_ptr()) }, ferry::sys::FERRY_OK);
    expect_err(tx.commit(), ErrorCode::NotInTransaction);
    let tx = db.begin_write().unwrap();
    assert_eq!(unsafe { ferry::sys::ferry_db_commit(db.as_ptr()) }, ferry::sys::FERRY_OK);
    expect_err(tx.cancel(), ErrorCode::NotInTransaction);
}

#[test]
fn history_counts_changing_commits_only_in_memory() {
    check_history(&memory_db(Delivery::Loop));
}

#[test]
fn history_counts_changing_commits_only_in_a_file() {
    let dir = TempDir::new("history");
    let schema = schema();
    check_history(&Database::open(&Options::path(dir.file("h.ferry")).schema(&schema)).unwrap());
}

fn check_history(db: &Database) {
    let id = ObjectId::generate();
    db.write(|_| Ok(())).unwrap(); // no changes: no changeset
    assert_eq!(db.history_count().unwrap(), 0);
    db.write(|tx| {
        tx.create("Item", &[("_id", id.into()), ("complexity", 1.into())])?;
        tx.set("Item", id, "itemName", "x")?;
        tx.add_int("Item", id, "complexity", 2)?;
        tx.list_push("Item", id, "tags", "t")
    })
    .unwrap();
    assert_eq!(db.history_count().unwrap(), 1, "one changeset per transaction");
    db.write(|tx| tx.delete("Item", id)).unwrap();
    assert_eq!(db.history_count().unwrap(), 2);
    // An upsert that changes nothing records nothing.
    db.write(|tx| tx.create("Item", &[("_id", id.into()), ("complexity", 5.into())])).unwrap();
    db.write(|tx| tx.upsert("Item", &[("_id", id.into()), ("complexity", 5.into())])).unwrap();
    assert_eq!(db.history_count().unwrap(), 3);
    db.verify_history().unwrap();
}
