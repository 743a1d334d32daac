//! Client reset (issue 5) end to end against a real `ferry-server` (`common::server`, with its
//! admin API enabled): the admin terminates sync and enables it again, so the server forgets
//! every client file and each device's next bind is refused with a client-reset error; the
//! session then runs its [`ClientResetMode`]. The scenarios follow the Swift suite
//! (`Tests/FerryClientTests/ClientResetSyncTests.swift`). Every wait is on a channel or a
//! libferry wait with a timeout.

mod common;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::server::Server;
use common::{expect_err, unique, TempDir};
use ferry::{
    App, AppOptions, ClientResetMode, ClientResetOutcome, ClientResetReport, Credentials, Database,
    DownloadBeforeOpen, ErrorCode, LogLevel, ObjectId, Options, SessionState, SyncAction,
    SyncError, SyncOptions, SyncSession, User, Value,
};

const APP_ID: &str = "item-app-seeds";
/// How long any one wait may take before the test fails.
const TIMEOUT: Duration = Duration::from_secs(30);

use common::server::item_schema;

fn unique_email(tag: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{}-{nanos}@example.com", unique(tag))
}

/// One device: an App in its own base directory (reconnecting quickly, so the reset follows
/// the admin's calls at once), its user, and the errors its handler received. The synced
/// database is opened separately, so that a test can drop and reopen it.
struct Device {
    app: App,
    user: User,
    errors: Receiver<SyncError>,
    dir: TempDir,
}

impl Device {
    /// A device logging in as `email` (registered first when `register`).
    fn new(server: &Server, email: &str, register: bool) -> Device {
        let dir = TempDir::new("device");
        let mut options = AppOptions::new(APP_ID, server.url.as_str(), dir.path());
        options.log_level = LogLevel::Warn;
        options.reconnect_delay_min = Duration::from_millis(50);
        options.reconnect_delay_max = Duration::from_millis(200);
        let app = App::new(options).unwrap();
        let (tx, errors) = mpsc::channel();
        app.set_sync_error_handler(move |_, error| {
            let _ = tx.send(error.clone());
        })
        .unwrap();
        if register {
            app.register_email(email, "password123", TIMEOUT).expect("register");
        }
        let user =
            app.log_in(Credentials::email_password(email, "password123"), TIMEOUT).expect("log in");
        Device { app, user, errors, dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.file("items.ferry")
    }

    /// Opens the device's synced database with `options` (built on its path and the Item
    /// schema) and subscribes to the user's items.
    fn open(
        &self,
        options: impl FnOnce(SyncOptions<'_>) -> SyncOptions<'_>,
    ) -> (SyncSession, Database) {
        let schema = item_schema();
        let options = options(SyncOptions::new(self.path(), &schema));
        let (session, db) = self.app.open_synced_with(&self.user, &options, TIMEOUT).expect("open");
        let query = format!("ownerId == '{}'", self.user.id());
        let version = session
            .update_subscriptions(|set| {
                set.add("mine", "Item", &query);
            })
            .unwrap();
        session.wait_for_subscriptions(version, TIMEOUT).expect("subscription complete");
        (session, db)
    }

    /// Waits for the error that ends a reset: the report of a finished automatic reset, or a
    /// fatal error (a reset handed to the host). Other errors before it are skipped.
    fn reset_error(&self) -> SyncError {
        let deadline = Instant::now() + TIMEOUT;
        let mut skipped = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.errors.recv_timeout(left) {
                Ok(e) if e.is_fatal || e.client_reset_report.is_some() => return e,
                Ok(e) => skipped.push(e),
                Err(_) => {
                    panic!("no client reset error within {TIMEOUT:?}; other errors: {skipped:?}")
                }
            }
        }
    }
}

/// Two devices of one email/password user, A and B.
fn two_devices(server: &Server, tag: &str) -> (Device, Device) {
    let email = unique_email(tag);
    let a = Device::new(server, &email, true);
    let b = Device::new(server, &email, false);
    assert_eq!(a.user.id(), b.user.id());
    (a, b)
}

/// Terminates sync and enables it again: the server forgets every client file.
fn terminate_and_enable(server: &Server) {
    server.admin_post("sync/terminate");
    server.admin_post("sync/enable");
}

fn create_item(db: &Database, id: ObjectId, owner: &str, name: &str) {
    db.write(|tx| {
        tx.create(
            "Item",
            &[
                ("_id", id.into()),
                ("ownerId", owner.into()),
                ("itemName", name.into()),
                ("complexity", 1.into()),
            ],
        )
    })
    .unwrap();
}

fn field(db: &Database, id: ObjectId, property: &str) -> Option<Value> {
    db.get("Item", id).unwrap().map(|item| item.get(property).unwrap())
}

fn names(db: &Database) -> Vec<String> {
    let mut names: Vec<String> = db
        .query("Item", "TRUEPREDICATE", &[])
        .unwrap()
        .values("itemName")
        .unwrap()
        .into_iter()
        .map(|v| match v {
            Value::String(s) => s,
            other => panic!("itemName {other:?}"),
        })
        .collect();
    names.sort();
    names
}

fn count(db: &Database) -> usize {
    db.query("Item", "TRUEPREDICATE", &[]).unwrap().len()
}

/// What the reset closures saw, sent from the loop thread.
#[derive(Debug)]
enum Seen {
    Before { lent: bool, items: usize, close: Option<ErrorCode>, copied: ferry::Result<()> },
    After { before_items: usize, after_items: usize, report: ClientResetReport },
}

// --- Recover -----------------------------------------------------------------------------------

#[test]
fn recover_replays_the_unsynced_changes_and_reports_them_to_the_handler_and_the_closures() {
    let server = Server::start_with_admin(None);
    let (a, b) = two_devices(&server, "reset-recover");
    let copy = a.dir.file("before-reset-copy.ferry");
    let (seen_tx, seen) = mpsc::channel();
    let after_tx = seen_tx.clone();
    let copy_path = copy.clone();
    let (sa, da) = a.open(|o| {
        o.client_reset_mode(ClientResetMode::RecoverUnsyncedChanges)
            .before_reset(move |before| {
                let close = before.close().err().map(|e| e.code);
                let _ = seen_tx.send(Seen::Before {
                    lent: before.is_lent(),
                    items: count(before),
                    close,
                    copied: before.write_copy(&copy_path),
                });
            })
            .after_reset(move |before, after, report| {
                let _ = after_tx.send(Seen::After {
                    before_items: count(before),
                    after_items: count(after),
                    report: report.clone(),
                });
            })
    });
    let (sb, db) = b.open(|o| o);
    let owner = a.user.id().to_owned();

    let ids: Vec<ObjectId> = (0..4).map(|_| ObjectId::generate()).collect();
    for (n, &id) in ids[..3].iter().enumerate() {
        create_item(&da, id, &owner, &format!("item {n}"));
    }
    sa.wait_for_upload(TIMEOUT).unwrap();
    sb.wait_for_download(TIMEOUT).unwrap();
    assert_eq!(names(&db), ["item 0", "item 1", "item 2"]);

    // A goes offline and changes things; B changes some of the same objects.
    sa.suspend().unwrap();
    da.write(|tx| {
        tx.create(
            "Item",
            &[
                ("_id", ids[3].into()),
                ("ownerId", owner.as_str().into()),
                ("itemName", "new on a".into()),
                ("complexity", 1.into()),
            ],
        )?;
        tx.set("Item", ids[0], "itemName", "renamed on a")?;
        tx.set("Item", ids[1], "complexity", 4)?;
        tx.delete("Item", ids[2])
    })
    .unwrap();
    db.write(|tx| {
        tx.set("Item", ids[0], "itemName", "renamed on b")?;
        tx.set("Item", ids[0], "complexity", 3)?;
        tx.delete("Item", ids[1])
    })
    .unwrap();
    sb.wait_for_upload(TIMEOUT).unwrap();

    terminate_and_enable(&server);
    sa.resume().unwrap();
    let error = a.reset_error();
    assert!(!error.is_fatal, "{error:?}");
    assert_eq!(error.action, SyncAction::ClientReset);
    assert_eq!(error.client_reset_backup_path, None);
    assert_eq!(error.client_reset_token, None);
    let report = error.client_reset_report.clone().expect("a report");
    assert!(report.recovered);
    assert!(report.unsynced_changesets >= 1, "{report:?}");
    assert_eq!(report.entries.len(), 4, "{report:?}");
    assert!(report.entries.iter().all(|e| e.object_type == "Item"), "{report:?}");
    let entry = |id: ObjectId| report.entry(id).unwrap_or_else(|| panic!("no entry for {id}"));
    assert_eq!(entry(ids[3]).reason, "created on this device and not yet synced");
    assert_eq!(entry(ids[3]).outcome, ClientResetOutcome::Recovered);
    assert_eq!(entry(ids[0]).reason, "the device's updates applied over the server's: itemName");
    assert_eq!(entry(ids[0]).outcome, ClientResetOutcome::Recovered);
    assert_eq!(entry(ids[1]).outcome, ClientResetOutcome::Discarded);
    assert!(!entry(ids[1]).reason.is_empty());
    assert_eq!(entry(ids[2]).outcome, ClientResetOutcome::Recovered);

    // The closures ran before the handler: before, then after with the same report.
    let before = seen.recv_timeout(TIMEOUT).expect("the before closure ran");
    let after = seen.recv_timeout(TIMEOUT).expect("the after closure ran");
    match before {
        Seen::Before { lent, items, close, copied } => {
            assert!(lent);
            assert_eq!(items, 3, "items 0, 1 and 3 before the reset");
            assert_eq!(close, Some(ErrorCode::InvalidArgument), "a lent database cannot be closed");
            copied.expect("write_copy of the lent database");
        }
        other => panic!("expected the before closure first, got {other:?}"),
    }
    match after {
        Seen::After { before_items, after_items, report: from_closure } => {
            assert_eq!(before_items, 3);
            assert_eq!(after_items, 2, "items 0 and 3 recovered, 1 stays deleted, 2 deleted");
            assert_eq!(from_closure, report, "the closure and the handler get the same report");
        }
        other => panic!("expected the after closure, got {other:?}"),
    }

    // The copy is an ordinary database with the data as it was before the reset.
    let old = Database::open(&Options::path(&copy)).expect("open the copy");
    assert_eq!(field(&old, ids[0], "itemName"), Some("renamed on a".into()));
    assert_eq!(field(&old, ids[0], "complexity"), Some(1.into()));
    assert_eq!(field(&old, ids[1], "complexity"), Some(4.into()));
    assert_eq!(field(&old, ids[2], "itemName"), None);
    assert_eq!(field(&old, ids[3], "itemName"), Some("new on a".into()));
    drop(old);

    // Both devices agree: the device's update wins the conflicting field, the server's other
    // change stays; deleted on the server and updated on A stays deleted; deleted on A is
    // deleted; created on A is synced.
    sa.wait_for_upload(TIMEOUT).unwrap();
    sa.wait_for_download(TIMEOUT).unwrap();
    sb.wait_for_download(TIMEOUT).unwrap();
    for (device, d) in [("a", &da), ("b", &db)] {
        assert_eq!(field(d, ids[0], "itemName"), Some("renamed on a".into()), "device {device}");
        assert_eq!(field(d, ids[0], "complexity"), Some(3.into()), "device {device}");
        assert_eq!(field(d, ids[1], "itemName"), None, "device {device}");
        assert_eq!(field(d, ids[2], "itemName"), None, "device {device}");
        assert_eq!(field(d, ids[3], "itemName"), Some("new on a".into()), "device {device}");
    }

    // The session syncs on as the new client file.
    create_item(&da, ObjectId::generate(), &owner, "after the reset");
    sa.wait_for_upload(TIMEOUT).unwrap();
    sb.wait_for_download(TIMEOUT).unwrap();
    assert!(names(&db).contains(&"after the reset".to_owned()));
    assert_eq!(sa.state().unwrap(), SessionState::Active);
    assert!(seen.try_recv().is_err(), "one reset, one call of each closure");
    assert_finished_reset_code(&error);
}

/// ferry.h: a finished automatic reset reaches the error handler as a non-fatal error with the
/// server's code (208), carrying the report.
#[track_caller]
fn assert_finished_reset_code(error: &SyncError) {
    assert_eq!(
        error.code,
        SyncError::BAD_CLIENT_FILE,
        "a finished automatic client reset carries the server's code: {error:?}"
    );
    assert!(!error.is_fatal, "a finished automatic client reset is not fatal: {error:?}");
}

// --- Discard -----------------------------------------------------------------------------------

#[test]
fn discard_drops_the_unsynced_changes_and_a_panicking_closure_does_not_stop_the_reset() {
    let server = Server::start_with_admin(None);
    let (a, b) = two_devices(&server, "reset-discard");
    let (ran_tx, ran) = mpsc::channel();
    // Opened through ferry_sync_open_async (download first, which needs a subscription): the
    // completion hands the closures over to the session.
    let query = format!("ownerId == '{}'", a.user.id());
    let (sa, da) = a.open(|o| {
        o.client_reset_mode(ClientResetMode::DiscardUnsyncedChanges)
            .download_before_open(DownloadBeforeOpen::Always)
            .initial_subscriptions(move |set| {
                set.add("mine", "Item", &query);
            })
            .before_reset(move |_| {
                let _ = ran_tx.send(());
                panic!("a before-reset closure that panics (expected by the test)");
            })
    });
    let (sb, db) = b.open(|o| o);
    let owner = a.user.id().to_owned();

    let kept = ObjectId::generate();
    let dropped = ObjectId::generate();
    create_item(&da, kept, &owner, "synced");
    sa.wait_for_upload(TIMEOUT).unwrap();
    sa.suspend().unwrap();
    create_item(&da, dropped, &owner, "never synced");
    da.write(|tx| tx.set("Item", kept, "itemName", "renamed offline")).unwrap();

    terminate_and_enable(&server);
    sa.resume().unwrap();
    let error = a.reset_error();
    ran.recv_timeout(TIMEOUT).expect("the before closure ran");
    assert!(!error.is_fatal, "{error:?}");
    assert_eq!(error.action, SyncAction::ClientReset);
    let report = error.client_reset_report.clone().expect("a report");
    assert!(!report.recovered);
    assert_eq!(
        report.entries.iter().map(|e| e.primary_key.clone()).collect::<Vec<_>>(),
        [Value::ObjectId(dropped), Value::ObjectId(kept)]
    );
    for entry in &report.entries {
        assert_eq!(entry.outcome, ClientResetOutcome::Discarded);
        assert_eq!(entry.reason, "the client reset mode is discardUnsyncedChanges");
    }

    assert_eq!(field(&da, dropped, "itemName"), None);
    assert_eq!(field(&da, kept, "itemName"), Some("synced".into()));
    sa.wait_for_upload(TIMEOUT).unwrap();
    sb.wait_for_download(TIMEOUT).unwrap();
    assert_eq!(names(&db), ["synced"]);
    assert_eq!(sa.state().unwrap(), SessionState::Active);
    assert_finished_reset_code(&error);
}

// --- Manual ------------------------------------------------------------------------------------

#[test]
fn manual_hands_the_reset_to_the_handler_and_handle_client_reset_performs_it() {
    let server = Server::start_with_admin(None);
    let (a, _b) = two_devices(&server, "reset-manual");
    let (after_tx, after_calls) = mpsc::channel();
    let (sa, da) = a.open(|o| {
        o.client_reset_mode(ClientResetMode::Manual).after_reset(move |_, _, _| {
            let _ = after_tx.send(());
        })
    });
    let owner = a.user.id().to_owned();

    let synced = ObjectId::generate();
    let unsynced = ObjectId::generate();
    create_item(&da, synced, &owner, "synced");
    sa.wait_for_upload(TIMEOUT).unwrap();
    sa.suspend().unwrap();
    create_item(&da, unsynced, &owner, "unsynced");

    terminate_and_enable(&server);
    sa.resume().unwrap();
    let error = a.reset_error();
    assert!(error.is_fatal, "{error:?}");
    assert_eq!(error.action, SyncAction::ClientReset);
    assert_eq!(error.code, SyncError::BAD_CLIENT_FILE);
    assert_eq!(error.client_reset_report, None);
    let token = error.client_reset_token.clone().expect("a token");
    let backup = error.client_reset_backup_path.clone().expect("a backup path");
    assert!(!backup.exists(), "the file moves there only when the reset is performed");
    assert_eq!(sa.state().unwrap(), SessionState::Inactive);
    // Nothing changed: the unsynced item is still there.
    assert_eq!(field(&da, unsynced, "itemName"), Some("unsynced".into()));

    // The file is still open: the reset refuses, clearly.
    expect_err(a.app.handle_client_reset(&token), ErrorCode::InvalidArgument);
    drop(sa);
    expect_err(a.app.handle_client_reset(&token), ErrorCode::InvalidArgument);
    drop(da);
    a.app.handle_client_reset(&token).expect("perform the reset");
    assert!(!a.path().exists(), "the file moved away");
    assert!(backup.exists(), "to the backup path");

    // The backup is an ordinary database with the device's data as it was.
    let old = Database::open(&Options::path(&backup)).expect("open the backup");
    assert_eq!(field(&old, unsynced, "itemName"), Some("unsynced".into()));
    assert_eq!(field(&old, synced, "itemName"), Some("synced".into()));
    drop(old);

    // The next open downloads a fresh copy: the server's state, nothing of the old file.
    let (fresh_session, fresh) = a.open(|o| o.client_reset_mode(ClientResetMode::Manual));
    fresh_session.wait_for_download(TIMEOUT).unwrap();
    assert_eq!(names(&fresh), ["synced"]);
    assert_eq!(field(&fresh, unsynced, "itemName"), None);
    assert_eq!(fresh_session.state().unwrap(), SessionState::Active);

    // No reset is pending any more, nor for a token that never was one.
    expect_err(a.app.handle_client_reset(&format!("{token}.nothing")), ErrorCode::NotFound);
    drop((fresh_session, fresh));
    expect_err(a.app.handle_client_reset(&token), ErrorCode::NotFound);
    // The after closure is for automatic resets only.
    assert!(after_calls.try_recv().is_err());
}

// --- Recovery disabled on the server -----------------------------------------------------------

/// Copies a directory tree.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn recovery_disabled_on_the_server_discards_or_hands_the_reset_over_by_mode() {
    let app_dir = TempDir::new("no-recovery-app");
    copy_tree(&common::server::item_app_dir(), app_dir.path());
    let config_path = app_dir.path().join("sync").join("config.json");
    let config = std::fs::read_to_string(&config_path).unwrap();
    let disabled = config
        .replace("\"is_recovery_mode_disabled\": false", "\"is_recovery_mode_disabled\": true");
    assert_ne!(config, disabled, "the example app's sync config names is_recovery_mode_disabled");
    std::fs::write(&config_path, disabled).unwrap();
    let server = Server::start_with_admin(Some(app_dir.path()));

    let discarding = Device::new(&server, &unique_email("no-recovery-discard"), true);
    let strict = Device::new(&server, &unique_email("no-recovery-strict"), true);
    let (s1, d1) =
        discarding.open(|o| o.client_reset_mode(ClientResetMode::RecoverOrDiscardUnsyncedChanges));
    let (s2, d2) = strict.open(|o| o.client_reset_mode(ClientResetMode::RecoverUnsyncedChanges));
    let (id1, id2) = (ObjectId::generate(), ObjectId::generate());
    s1.suspend().unwrap();
    s2.suspend().unwrap();
    create_item(&d1, id1, discarding.user.id(), "unsynced");
    create_item(&d2, id2, strict.user.id(), "unsynced");

    terminate_and_enable(&server);
    s1.resume().unwrap();
    s2.resume().unwrap();

    // Recover or discard: discards, and says why.
    let e1 = discarding.reset_error();
    assert!(!e1.is_fatal, "{e1:?}");
    assert_eq!(e1.action, SyncAction::ClientResetNoRecovery);
    let report = e1.client_reset_report.clone().expect("a report");
    assert!(!report.recovered);
    assert_eq!(report.entries.len(), 1, "{report:?}");
    assert_eq!(report.entries[0].primary_key, Value::ObjectId(id1));
    assert_eq!(report.entries[0].outcome, ClientResetOutcome::Discarded);
    assert_eq!(report.entries[0].reason, "the server disabled recovery");
    assert_eq!(field(&d1, id1, "itemName"), None);

    // Recover only: the reset goes to the host, as in manual mode.
    let e2 = strict.reset_error();
    assert!(e2.is_fatal, "{e2:?}");
    assert_eq!(e2.action, SyncAction::ClientResetNoRecovery);
    assert_eq!(e2.client_reset_report, None);
    assert!(e2.client_reset_backup_path.is_some(), "{e2:?}");
    let token = e2.client_reset_token.clone().expect("a token");
    assert_eq!(field(&d2, id2, "itemName"), Some("unsynced".into()));
    assert_eq!(s2.state().unwrap(), SessionState::Inactive);
    drop((s2, d2));
    strict.app.handle_client_reset(&token).expect("perform the reset");
    let old = Database::open(&Options::path(e2.client_reset_backup_path.unwrap())).unwrap();
    assert_eq!(field(&old, id2, "itemName"), Some("unsynced".into()));
    drop((s1, d1));
}

// --- Without a server --------------------------------------------------------------------------

#[test]
fn write_copy_of_a_local_database_opens_with_its_data() {
    let dir = TempDir::new("copy");
    let schema = item_schema();
    let db = Database::open(&Options::path(dir.file("a.ferry")).schema(&schema)).unwrap();
    assert!(!db.is_lent());
    let id = ObjectId::generate();
    create_item(&db, id, "me", "copied");
    let copy = dir.file("copy.ferry");
    db.write_copy(&copy).unwrap();
    expect_err(db.write_copy(&copy), ErrorCode::InvalidArgument);
    expect_err(db.write_copy(""), ErrorCode::InvalidArgument);
    // Changes after the copy stay out of it.
    db.write(|tx| tx.set("Item", id, "itemName", "changed")).unwrap();
    let copied = Database::open(&Options::path(&copy)).unwrap();
    assert_eq!(field(&copied, id, "itemName"), Some("copied".into()));
    db.close().unwrap();
    expect_err(db.write_copy(dir.file("closed.ferry")), ErrorCode::Closed);
}

#[test]
fn handle_client_reset_without_a_pending_reset_is_not_found() {
    let dir = TempDir::new("no-reset");
    let app = App::new(AppOptions::new(APP_ID, "http://127.0.0.1:9", dir.path())).unwrap();
    let missing: &Path = &dir.file("never-opened.ferry");
    expect_err(app.handle_client_reset(missing.to_str().unwrap()), ErrorCode::NotFound);
    expect_err(app.handle_client_reset("a\0b"), ErrorCode::InvalidArgument);
    // A local database has no pending reset either.
    let schema = item_schema();
    let path = dir.file("local.ferry");
    drop(Database::open(&Options::path(&path).schema(&schema)).unwrap());
    expect_err(app.handle_client_reset(path.to_str().unwrap()), ErrorCode::NotFound);
}
