//! The pre-flight check (SPEC F-PRECHECK) against a real `ferry-server` (a subprocess on a free
//! port) serving the seeds' Item app: the server publishes the user's write rules after each
//! BIND; the device checks every commit before upload, offline too. Warn commits and reports
//! at once; strict fails with `ErrorCode::WriteRejected` and writes nothing; the rules survive
//! a restart in the file.

mod common;

use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use common::server::{item_schema, Server};
use common::TempDir;
use ferry::{
    App, AppOptions, CompensatingWrite, Credentials, Database, ErrorCode, LogLevel, ObjectId,
    PrecheckMode, SyncOptions, SyncSession, User, Value,
};

const APP_ID: &str = "item-app-seeds";
const TIMEOUT: Duration = Duration::from_secs(30);
const WRONG_OWNER: &str = "This string does not match the user.id";

fn outside(id: ObjectId) -> String {
    format!("write to \"{id}\" in table \"Item\" not allowed; object is outside of the current query view")
}

fn denied(id: ObjectId) -> String {
    format!("write to \"{id}\" in table \"Item\" was denied by write filter in role \"owner-read-write\"")
}

/// What the precheck closure received: the writes, whether committed, and on which thread.
type Findings = Arc<Mutex<Vec<(Vec<CompensatingWrite>, bool, ThreadId)>>>;

fn app(url: &str, dir: &TempDir) -> App {
    App::new(AppOptions {
        app_id: APP_ID.into(),
        base_url: url.into(),
        base_directory: dir.path().to_path_buf(),
        log_level: LogLevel::Warn,
        ..AppOptions::default()
    })
    .unwrap()
}

fn open(
    app: &App,
    user: &User,
    dir: &TempDir,
    mode: PrecheckMode,
    findings: &Findings,
) -> (SyncSession, Database) {
    let sink = Arc::clone(findings);
    let schema = item_schema();
    let options = SyncOptions::new(dir.file("items.ferry"), &schema)
        .precheck_mode(mode)
        .on_precheck(move |writes, committed| {
            sink.lock().unwrap().push((writes.to_vec(), committed, thread::current().id()))
        });
    app.open_synced_with(user, &options, TIMEOUT).expect("open synced")
}

/// Subscribes online (the rules arrive after BIND, before the subscription completes), then
/// suspends the session: offline from here.
fn subscribe_then_go_offline(session: &SyncSession) {
    session.wait_for_download(TIMEOUT).expect("first download");
    let version = session
        .update_subscriptions(|set| {
            set.add("items", "Item", "complexity <= 4");
        })
        .unwrap();
    session.wait_for_subscriptions(version, TIMEOUT).expect("subscription complete");
    session.suspend().unwrap();
}

fn create(db: &Database, id: ObjectId, owner: &str, complexity: i64) -> ferry::Result<()> {
    db.write(|tx| {
        tx.create(
            "Item",
            &[
                ("_id", id.into()),
                ("ownerId", owner.into()),
                ("itemName", "item".into()),
                ("complexity", complexity.into()),
            ],
        )?;
        Ok(())
    })
}

fn cw(id: ObjectId, reason: String) -> CompensatingWrite {
    CompensatingWrite { object_type: "Item".into(), primary_key: Value::ObjectId(id), reason }
}

#[test]
fn warn_commits_and_reports_the_seeds_writes_at_once_offline() {
    let server = Server::start();
    let dir = TempDir::new("precheck-warn");
    let app = app(&server.url, &dir);
    let user = app.log_in(Credentials::Anonymous, TIMEOUT).expect("log in");
    let findings = Findings::default();
    let (session, db) = open(&app, &user, &dir, PrecheckMode::Warn, &findings);
    subscribe_then_go_offline(&session);

    let (complex, foreign, fine) =
        (ObjectId::generate(), ObjectId::generate(), ObjectId::generate());
    create(&db, complex, user.id(), 7).unwrap();
    {
        let f = findings.lock().unwrap();
        assert_eq!(f.len(), 1, "reported inside the commit");
        assert_eq!(f[0].0, vec![cw(complex, outside(complex))]);
        assert!(f[0].1);
        assert_eq!(f[0].2, thread::current().id());
    }
    create(&db, foreign, WRONG_OWNER, 1).unwrap();
    create(&db, fine, user.id(), 2).unwrap();
    let f = findings.lock().unwrap().clone();
    assert_eq!(f.len(), 2);
    assert_eq!(f[1].0, vec![cw(foreign, denied(foreign))]);
    assert!(db.get("Item", complex).unwrap().is_some());
    assert!(db.get("Item", foreign).unwrap().is_some());
    drop(session);
}

#[test]
fn strict_refuses_the_seeds_writes_and_the_rules_survive_a_restart() {
    let server = Server::start();
    let dir = TempDir::new("precheck-strict");
    let user_id;
    {
        let app = app(&server.url, &dir);
        let user = app.log_in(Credentials::Anonymous, TIMEOUT).expect("log in");
        user_id = user.id().to_string();
        let findings = Findings::default();
        let (session, db) = open(&app, &user, &dir, PrecheckMode::Strict, &findings);
        subscribe_then_go_offline(&session);

        let (complex, foreign, fine) =
            (ObjectId::generate(), ObjectId::generate(), ObjectId::generate());
        let e = create(&db, complex, user.id(), 7).unwrap_err();
        assert_eq!(e.code, ErrorCode::WriteRejected);
        assert!(e.message.contains(&outside(complex)), "{}", e.message);
        let e = create(&db, foreign, WRONG_OWNER, 1).unwrap_err();
        assert_eq!(e.code, ErrorCode::WriteRejected);
        assert!(e.message.contains(&denied(foreign)), "{}", e.message);
        let f = findings.lock().unwrap().clone();
        assert_eq!(
            f.iter().map(|x| (x.0.clone(), x.1)).collect::<Vec<_>>(),
            vec![
                (vec![cw(complex, outside(complex))], false),
                (vec![cw(foreign, denied(foreign))], false),
            ]
        );
        assert!(db.get("Item", complex).unwrap().is_none());
        assert!(db.get("Item", foreign).unwrap().is_none());
        create(&db, fine, user.id(), 2).unwrap();
        drop(session);
    }
    drop(server);
    // No server: a new App on the same directory, the cached user, the rules from the file.
    let app = app("http://127.0.0.1:9", &dir);
    let user = app.current_user().unwrap().expect("a cached user");
    assert_eq!(user.id(), user_id);
    let findings = Findings::default();
    let (session, db) = open(&app, &user, &dir, PrecheckMode::Strict, &findings);
    let other = ObjectId::generate();
    assert_eq!(create(&db, other, WRONG_OWNER, 1).unwrap_err().code, ErrorCode::WriteRejected);
    assert_eq!(findings.lock().unwrap()[0].0, vec![cw(other, denied(other))]);
    drop(session);
}
