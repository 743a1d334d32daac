//! Write receipts: local semantics on a database of its own, and against a real `ferry-server`
//! (a subprocess on a free port): local, uploaded, acknowledged, rejected with the
//! compensating write, and acknowledged after a restart. Waits have timeouts; nothing sleeps.

mod common;

use std::time::Duration;

use common::server::{item_schema, Server};
use common::{expect_err, memory_db, TempDir};
use ferry::{
    App, AppOptions, CompensatingWrite, Credentials, Database, Delivery, ErrorCode, LogLevel,
    ObjectId, Receipt, ReceiptState, SyncSession, Value,
};

const APP_ID: &str = "item-app-seeds";
const TIMEOUT: Duration = Duration::from_secs(30);

fn create(db: &Database, owner: &str, complexity: i64) -> (ObjectId, u64) {
    let id = ObjectId::generate();
    let tx = db.begin_write().unwrap();
    tx.create(
        "Item",
        &[
            ("_id", id.into()),
            ("ownerId", owner.into()),
            ("itemName", "x".into()),
            ("complexity", complexity.into()),
        ],
    )
    .unwrap();
    (id, tx.commit_with_receipt().unwrap())
}

#[test]
fn local_receipts() {
    let db = memory_db(Delivery::Poll);
    let tx = db.begin_write().unwrap();
    tx.create("Item", &[("_id", ObjectId::generate().into())]).unwrap();
    let a = tx.commit_with_receipt().unwrap();
    let tx = db.begin_write().unwrap();
    tx.create("Item", &[("_id", ObjectId::generate().into())]).unwrap();
    let b = tx.commit_with_receipt().unwrap();
    assert!(a > 0 && b > a, "receipts {a} then {b}");
    assert_eq!(db.receipt_state(a).unwrap(), ReceiptState::Local);
    assert_eq!(
        db.read_receipt(b).unwrap(),
        Receipt { receipt: b, state: ReceiptState::Local, compensating_writes: vec![] }
    );
    // A transaction that changed nothing: receipt 0, nothing to sync.
    assert_eq!(db.begin_write().unwrap().commit_with_receipt().unwrap(), 0);
    assert_eq!(db.receipt_state(0).unwrap(), ReceiptState::Acknowledged);
    expect_err(db.receipt_state(b + 100), ErrorCode::NotFound);
    expect_err(db.read_receipt(b + 100), ErrorCode::NotFound);
}

fn app_in(server: &Server, dir: &TempDir) -> App {
    App::new(AppOptions {
        app_id: APP_ID.into(),
        base_url: server.url.clone(),
        base_directory: dir.path().to_path_buf(),
        log_level: LogLevel::Warn,
        ..AppOptions::default()
    })
    .unwrap()
}

fn subscribe(session: &SyncSession) {
    let version = session
        .update_subscriptions(|set| {
            set.add("items", "Item", "complexity <= 4");
        })
        .unwrap();
    session.wait_for_subscriptions(version, TIMEOUT).expect("subscription complete");
}

#[test]
fn receipts_reach_acknowledged_and_rejected() {
    let server = Server::start();
    let dir = TempDir::new("receipts");
    let app = app_in(&server, &dir);
    let user = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let (session, db) = app.open_synced(&user, dir.file("items.ferry"), &item_schema()).unwrap();
    session.wait_for_download(TIMEOUT).unwrap();
    subscribe(&session);
    session.suspend().unwrap();
    let (_, good) = create(&db, user.id(), 1);
    let (bad_id, bad) = create(&db, user.id(), 7); // outside the view: reverted
    assert_eq!(db.receipt_state(good).unwrap(), ReceiptState::Local);
    session.resume().unwrap();
    let uploaded = session.wait_for_receipt(good, ReceiptState::Uploaded, TIMEOUT).unwrap();
    assert!(uploaded.state >= ReceiptState::Uploaded, "{uploaded:?}");
    let acknowledged = session.wait_for_receipt(good, ReceiptState::Acknowledged, TIMEOUT).unwrap();
    assert_eq!(acknowledged.state, ReceiptState::Acknowledged);
    let rejected = session.wait_for_receipt(bad, ReceiptState::Acknowledged, TIMEOUT).unwrap();
    assert_eq!(rejected.state, ReceiptState::Rejected);
    assert_eq!(
        rejected.compensating_writes,
        vec![CompensatingWrite {
            object_type: "Item".into(),
            primary_key: Value::ObjectId(bad_id),
            reason: format!(
                "write to \"{bad_id}\" in table \"Item\" not allowed; object is outside of the current query view"
            ),
        }]
    );
    assert_eq!(db.read_receipt(bad).unwrap(), rejected);
    expect_err(
        session.wait_for_receipt(bad + 1000, ReceiptState::Local, TIMEOUT),
        ErrorCode::NotFound,
    );
}

#[test]
fn receipts_survive_a_restart() {
    let server = Server::start();
    let dir = TempDir::new("receipts-restart");
    let receipt = {
        let app = app_in(&server, &dir);
        let user = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
        let (session, db) =
            app.open_synced(&user, dir.file("items.ferry"), &item_schema()).unwrap();
        session.wait_for_download(TIMEOUT).unwrap();
        subscribe(&session);
        session.suspend().unwrap();
        let (_, r) = create(&db, user.id(), 1);
        assert_eq!(db.receipt_state(r).unwrap(), ReceiptState::Local);
        r
    }; // everything dropped: the session, the database, the App

    let app = app_in(&server, &dir);
    let user = app.current_user().unwrap().expect("the cached user");
    let (session, db) = app.open_synced(&user, dir.file("items.ferry"), &item_schema()).unwrap();
    let status = session.wait_for_receipt(receipt, ReceiptState::Acknowledged, TIMEOUT).unwrap();
    assert_eq!(status.state, ReceiptState::Acknowledged);
    assert_eq!(db.receipt_state(receipt).unwrap(), ReceiptState::Acknowledged);
}
