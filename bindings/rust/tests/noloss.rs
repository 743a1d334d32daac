//! SPEC F-NOLOSS against a real `ferry-server` (the seeds' Item app): a compensating write
//! reports what its revert took from the device (`SyncError::reverted`), and
//! `Transaction::reapply_reverted` puts it back. The writes of a case are made while the
//! session is suspended, so they reach the server in one upload; the oracle is what the test
//! wrote. Errors are waited for on a condition variable with a timeout.

mod common;

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use common::server::{item_schema, Server};
use common::TempDir;
use ferry::{
    App, AppOptions, Credentials, Database, LocalWrite, LogLevel, ObjectId, RevertKind, SyncError,
    SyncSession, Transaction, User, Value, WriteKind,
};

const TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct ErrorLog {
    errors: Mutex<Vec<SyncError>>,
    arrived: Condvar,
}

impl ErrorLog {
    fn wait(&self, count: usize) -> Vec<SyncError> {
        let errors = self.errors.lock().unwrap();
        let (errors, timeout) =
            self.arrived.wait_timeout_while(errors, TIMEOUT, |e| e.len() < count).unwrap();
        assert!(!timeout.timed_out(), "waited for {count} sync errors, got {:?}", *errors);
        errors.clone()
    }
}

struct Device {
    session: SyncSession,
    db: Database,
    user: User,
    _app: App,
    errors: Arc<ErrorLog>,
    _dir: TempDir,
}

impl Device {
    fn new(server: &Server) -> Device {
        let dir = TempDir::new("noloss");
        let app = App::new(AppOptions {
            app_id: "item-app-seeds".into(),
            base_url: server.url.clone(),
            base_directory: dir.path().to_path_buf(),
            log_level: LogLevel::Warn,
            ..AppOptions::default()
        })
        .unwrap();
        let errors = Arc::new(ErrorLog::default());
        let sink = Arc::clone(&errors);
        app.set_sync_error_handler(move |_, error| {
            sink.errors.lock().unwrap().push(error.clone());
            sink.arrived.notify_all();
        })
        .unwrap();
        let user = app.log_in(Credentials::Anonymous, TIMEOUT).expect("log in");
        let (session, db) =
            app.open_synced(&user, dir.file("items.ferry"), &item_schema()).expect("open synced");
        session.wait_for_download(TIMEOUT).expect("first download");
        let version = session
            .update_subscriptions(|set| {
                set.add("items", "Item", "complexity <= 4");
            })
            .unwrap();
        session.wait_for_subscriptions(version, TIMEOUT).expect("subscription complete");
        Device { session, db, user, _app: app, errors, _dir: dir }
    }

    fn sync(&self) {
        self.session.wait_for_upload(TIMEOUT).expect("upload");
        self.session.wait_for_download(TIMEOUT).expect("download");
    }

    /// Commits each write in its own transaction while suspended, resumes, and returns the
    /// `n`th sync error and the writes' local versions.
    fn offline(
        &self,
        n: usize,
        writes: &[&dyn Fn(&Transaction<'_>) -> ferry::Result<()>],
    ) -> (SyncError, Vec<u64>) {
        self.session.suspend().unwrap();
        let mut versions = Vec::new();
        for w in writes {
            self.db.write(|tx| w(tx)).unwrap();
            versions.push(self.db.history_count().unwrap());
        }
        self.session.resume().unwrap();
        (self.errors.wait(n)[n - 1].clone(), versions)
    }

    fn item(&self, id: ObjectId) -> Option<(Value, Value, Value)> {
        self.db.get("Item", id).unwrap().map(|o| {
            (o.get("ownerId").unwrap(), o.get("itemName").unwrap(), o.get("complexity").unwrap())
        })
    }
}

#[test]
fn a_reverted_create_keeps_its_values_and_later_writes() {
    let server = Server::start();
    let d = Device::new(&server);
    let id = ObjectId::generate();
    let (error, v) = d.offline(
        1,
        &[
            &|tx| {
                tx.create(
                    "Item",
                    &[
                        ("_id", id.into()),
                        ("ownerId", "someone else".into()),
                        ("itemName", "draft".into()),
                        ("complexity", 1i64.into()),
                    ],
                )
            },
            &|tx| tx.set("Item", id, "itemName", "Write the report"),
            &|tx| tx.add_int("Item", id, "complexity", 2),
        ],
    );
    assert_eq!(error.code, 231);
    assert_eq!(error.compensating_writes.len(), 1);
    let r = error.reverted(0).expect("the revert took the object");
    assert_eq!(
        (r.object_type.as_str(), &r.primary_key, r.revert),
        ("Item", &Value::ObjectId(id), RevertKind::Removed)
    );
    let values: Vec<(&str, &Value)> =
        r.values.iter().map(|v| (v.name.as_str(), &v.value)).collect();
    assert_eq!(
        values,
        vec![
            ("ownerId", &Value::from("someone else")),
            ("itemName", &Value::from("Write the report")),
            ("complexity", &Value::Int(3)),
        ]
    );
    assert_eq!(
        r.writes,
        vec![
            LocalWrite {
                local_version: v[0],
                kind: WriteKind::Create,
                property: None,
                value: Value::Null,
                index: 0
            },
            LocalWrite {
                local_version: v[1],
                kind: WriteKind::Set,
                property: Some("itemName".into()),
                value: "Write the report".into(),
                index: 0
            },
            LocalWrite {
                local_version: v[2],
                kind: WriteKind::AddInt,
                property: Some("complexity".into()),
                value: Value::Int(2),
                index: 0
            },
        ]
    );
    assert_eq!(d.item(id), None);
    // Put back with the owner fixed: it syncs and stays.
    d.db.write(|tx| tx.reapply_reverted(r, &[("ownerId", d.user.id().into())])).unwrap();
    d.sync();
    d.sync();
    assert_eq!(
        d.item(id),
        Some((Value::from(d.user.id()), Value::from("Write the report"), Value::Int(3)))
    );
    assert_eq!(d.errors.wait(1).len(), 1);
}

#[test]
fn a_reverted_update_followed_by_legal_and_illegal_updates() {
    let server = Server::start();
    let d = Device::new(&server);
    let id = ObjectId::generate();
    let me = d.user.id().to_owned();
    d.db.write(|tx| {
        tx.create(
            "Item",
            &[
                ("_id", id.into()),
                ("ownerId", me.as_str().into()),
                ("itemName", "start".into()),
                ("complexity", 1i64.into()),
            ],
        )
    })
    .unwrap();
    d.sync();
    let (error, v) = d.offline(
        1,
        &[
            &|tx| tx.set("Item", id, "ownerId", "someone else"), // denied
            &|tx| tx.set("Item", id, "itemName", "legal"),       // stands
            &|tx| tx.set("Item", id, "complexity", 7i64),        // out of view
        ],
    );
    assert_eq!(error.compensating_writes.len(), 2);
    let r = error.reverted(0).expect("a record");
    assert!(std::ptr::eq(r, error.reverted(1).unwrap()), "one record for the object");
    assert_eq!(r.revert, RevertKind::Changed);
    let values: Vec<(&str, &Value)> =
        r.values.iter().map(|v| (v.name.as_str(), &v.value)).collect();
    assert_eq!(
        values,
        vec![("ownerId", &Value::from("someone else")), ("complexity", &Value::Int(7))]
    );
    let writes: Vec<(u64, Option<&str>)> =
        r.writes.iter().map(|w| (w.local_version, w.property.as_deref())).collect();
    assert_eq!(writes, vec![(v[0], Some("ownerId")), (v[2], Some("complexity"))]);
    assert_eq!(d.item(id), Some((Value::from(me.as_str()), Value::from("legal"), Value::Int(1))));
    d.db.write(|tx| {
        tx.reapply_reverted(r, &[("ownerId", me.as_str().into()), ("complexity", 4i64.into())])
    })
    .unwrap();
    d.sync();
    d.sync();
    assert_eq!(d.item(id), Some((Value::from(me.as_str()), Value::from("legal"), Value::Int(4))));
    assert_eq!(d.errors.wait(1).len(), 1);
}
