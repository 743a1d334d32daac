//! Sync end to end against a real `ferry-server` (a subprocess on a free port) serving the
//! seeds' Item app (`examples/item-app`): logins, two devices of one user, isolation between
//! users, compensating writes, rejected subscriptions, and the binding's threading rules.
//!
//! The server binary comes from `$FERRY_SERVER`, by default `<repo>/build/ferry-server`.

mod common;

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::server::Server;
use common::{unique, TempDir};
use ferry::{
    App, AppOptions, CompensatingWrite, Credentials, Database, ErrorCode, LogLevel, ObjectId,
    SessionId, SubscriptionState, SyncAction, SyncError, SyncSession, User, UserState, Value,
};

const APP_ID: &str = "item-app-seeds";
/// How long any one network operation may take before the test fails.
const TIMEOUT: Duration = Duration::from_secs(30);
const REVERTED: &str =
    "Client attempted a write that is outside of permissions or query filters; it has been reverted";

// --- Devices -----------------------------------------------------------------------------------

/// The seeds' Item schema as a device declares it.
use common::server::item_schema;

/// The sync errors an App's handler received, with a condition variable to wait for them.
#[derive(Default)]
struct ErrorLog {
    errors: Mutex<Vec<(Option<SessionId>, SyncError)>>,
    arrived: Condvar,
}

impl ErrorLog {
    fn push(&self, session: Option<SessionId>, error: SyncError) {
        self.errors.lock().unwrap().push((session, error));
        self.arrived.notify_all();
    }

    /// Waits until at least `count` errors arrived (panics after TIMEOUT).
    fn wait(&self, count: usize) -> Vec<(Option<SessionId>, SyncError)> {
        let errors = self.errors.lock().unwrap();
        let (errors, timeout) =
            self.arrived.wait_timeout_while(errors, TIMEOUT, |e| e.len() < count).unwrap();
        assert!(!timeout.timed_out(), "waited for {count} sync errors, got {:?}", *errors);
        errors.clone()
    }

    fn all(&self) -> Vec<(Option<SessionId>, SyncError)> {
        self.errors.lock().unwrap().clone()
    }
}

/// A new App in a fresh base directory, with an error log as its sync error handler.
fn new_app(server: &Server, dir: &TempDir) -> (App, Arc<ErrorLog>) {
    let app = App::new(AppOptions {
        app_id: APP_ID.into(),
        base_url: server.url.clone(),
        base_directory: dir.path().to_path_buf(),
        log_level: LogLevel::Warn,
        ..AppOptions::default()
    })
    .unwrap();
    let log = Arc::new(ErrorLog::default());
    let sink = Arc::clone(&log);
    app.set_sync_error_handler(move |session, error| {
        sink.push(session.map(|s| s.id()), error.clone())
    })
    .unwrap();
    (app, log)
}

/// One device: an App with its own base directory, a logged-in user and a synced database.
/// (Fields drop in order: the session first, the directory last.)
struct Device {
    session: SyncSession,
    db: Database,
    user: User,
    app: App,
    errors: Arc<ErrorLog>,
    _dir: TempDir,
}

impl Device {
    fn new(server: &Server, credentials: Credentials) -> Device {
        let dir = TempDir::new("device");
        let (app, errors) = new_app(server, &dir);
        let user = app.log_in(credentials, TIMEOUT).expect("log in");
        let (session, db) =
            app.open_synced(&user, dir.file("items.ferry"), &item_schema()).expect("open synced");
        // A first download: the device starts from the server's state.
        session.wait_for_download(TIMEOUT).expect("first download");
        Device { session, db, user, app, errors, _dir: dir }
    }

    fn subscribe(&self, name: &str, query: &str) {
        let version = self
            .session
            .update_subscriptions(|set| {
                set.add(name, "Item", query);
            })
            .unwrap();
        self.session.wait_for_subscriptions(version, TIMEOUT).expect("subscription complete");
    }

    fn create_item(&self, id: ObjectId, owner: &str, name: &str, complexity: i64) {
        self.db
            .write(|tx| {
                tx.create(
                    "Item",
                    &[
                        ("_id", id.into()),
                        ("ownerId", owner.into()),
                        ("itemName", name.into()),
                        ("complexity", complexity.into()),
                    ],
                )
            })
            .unwrap();
    }

    fn item_name(&self, id: ObjectId) -> Option<Value> {
        self.db.get("Item", id).unwrap().map(|item| item.get("itemName").unwrap())
    }

    fn item_count(&self) -> usize {
        self.db.query("Item", "TRUEPREDICATE", &[]).unwrap().len()
    }

    fn upload(&self) {
        self.session.wait_for_upload(TIMEOUT).expect("upload");
    }

    fn download(&self) {
        self.session.wait_for_download(TIMEOUT).expect("download");
    }
}

fn unique_email(tag: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{}-{nanos}@example.com", unique(tag))
}

/// Registers an email/password user through a throwaway App.
fn register(server: &Server, email: &str, password: &str) {
    let dir = TempDir::new("register");
    let (app, _) = new_app(server, &dir);
    app.register_email(email, password, TIMEOUT).expect("register");
}

// --- Tests -------------------------------------------------------------------------------------

#[test]
fn two_devices_of_one_user_sync_both_ways() {
    let server = Server::start();
    let (email, password) = (unique_email("ana"), "password123");
    register(&server, &email, password);
    let a = Device::new(&server, Credentials::email_password(&email, password));
    let b = Device::new(&server, Credentials::email_password(&email, password));
    assert_eq!(a.user.id(), b.user.id(), "one user on two devices");
    assert_eq!(a.user.state().unwrap(), UserState::LoggedIn);
    assert_eq!(
        a.app.current_user().unwrap().map(|u| u.id().to_owned()),
        Some(a.user.id().to_owned())
    );
    let users = a.app.users().unwrap();
    assert_eq!(users.iter().map(User::id).collect::<Vec<_>>(), vec![a.user.id()]);

    a.subscribe("items", "complexity <= 4");
    b.subscribe("items", "complexity <= 4");
    let subs = a.session.subscriptions().unwrap();
    assert_eq!(subs.state, SubscriptionState::Complete);
    assert_eq!(subs.error, None);
    assert_eq!(subs.subscriptions.len(), 1);
    assert_eq!(
        (
            subs.subscriptions[0].name.as_str(),
            subs.subscriptions[0].object_type.as_str(),
            subs.subscriptions[0].query.as_str()
        ),
        ("items", "Item", "complexity <= 4")
    );

    // A to B.
    let id = ObjectId::generate();
    a.create_item(id, a.user.id(), "Write code", 3);
    a.upload();
    b.download();
    assert_eq!(b.item_name(id), Some(Value::from("Write code")));
    let item = b.db.get("Item", id).unwrap().unwrap();
    assert_eq!(item.get("ownerId").unwrap(), Value::from(a.user.id()));
    assert_eq!(item.get("complexity").unwrap(), Value::Int(3));

    // And back.
    b.db.write(|tx| tx.set("Item", id, "itemName", "Write tests")).unwrap();
    b.upload();
    a.download();
    assert_eq!(a.item_name(id), Some(Value::from("Write tests")));

    assert!(a.errors.all().is_empty(), "{:?}", a.errors.all());
    assert!(b.errors.all().is_empty(), "{:?}", b.errors.all());
}

#[test]
fn another_user_never_receives_the_items() {
    let server = Server::start();
    let a = Device::new(&server, Credentials::Anonymous);
    let other = Device::new(&server, Credentials::Anonymous);
    assert_ne!(a.user.id(), other.user.id(), "anonymous login makes a new user each time");

    a.subscribe("items", "complexity <= 4");
    for i in 0..3 {
        a.create_item(ObjectId::generate(), a.user.id(), &format!("mine {i}"), i);
    }
    a.upload();
    assert_eq!(a.item_count(), 3);

    // Everything the other user may see, after the items are durable on the server.
    other.subscribe("all", "TRUEPREDICATE");
    other.subscribe("by-complexity", "complexity >= 0");
    other.download();
    assert_eq!(other.session.subscriptions().unwrap().subscriptions.len(), 2);
    assert_eq!(other.item_count(), 0, "another user received A's items");
    assert!(other.errors.all().is_empty(), "{:?}", other.errors.all());
}

#[test]
fn out_of_view_and_wrong_owner_writes_are_reverted() {
    let server = Server::start();
    let a = Device::new(&server, Credentials::Anonymous);
    a.subscribe("items", "complexity <= 4");

    let complex = ObjectId::generate();
    a.create_item(complex, a.user.id(), "Do the dishes", 7);
    let first = a.errors.wait(1);
    // The handler ran after the revert was integrated: the object is gone already.
    assert_eq!(a.item_name(complex), None, "the out-of-view write was not reverted locally");

    let foreign = ObjectId::generate();
    a.create_item(
        foreign,
        "This string does not match the user.id",
        "Write code that generates a permission error",
        1,
    );
    let errors = a.errors.wait(2);
    assert_eq!(a.item_name(foreign), None, "the wrong-owner write was not reverted locally");
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(first[0], errors[0]);

    let expected = [
        (complex, format!("write to \"{complex}\" in table \"Item\" not allowed; object is outside of the current query view")),
        (foreign, format!("write to \"{foreign}\" in table \"Item\" was denied by write filter in role \"owner-read-write\"")),
    ];
    for ((session, error), (id, reason)) in errors.iter().zip(expected) {
        assert_eq!(*session, Some(a.session.id()));
        assert_eq!(error.code, 231);
        assert!(error.is_compensating_write());
        assert_eq!(error.message, REVERTED);
        assert!(!error.is_fatal);
        assert_eq!(error.action, SyncAction::Warning);
        assert_eq!(
            error.compensating_writes,
            vec![CompensatingWrite {
                object_type: "Item".into(),
                primary_key: Value::ObjectId(id),
                reason
            }]
        );
    }

    // The session goes on syncing: an allowed write still uploads.
    let fine = ObjectId::generate();
    a.create_item(fine, a.user.id(), "fine", 2);
    a.upload();
    assert_eq!(a.item_name(fine), Some(Value::from("fine")));
    assert_eq!(a.errors.all().len(), 2);
}

#[test]
fn subscription_on_a_non_queryable_field_is_rejected() {
    let server = Server::start();
    let a = Device::new(&server, Credentials::Anonymous);
    // The handler also gets the rejection (code 226), with the session, whose subscription
    // set it may read.
    let (tx, rx) = mpsc::channel();
    let session_id = a.session.id();
    a.app
        .set_sync_error_handler(move |session, error| {
            let session = session.expect("the session is alive");
            let state = session.subscriptions().map(|s| s.state);
            tx.send((session.id(), error.clone(), state)).unwrap();
        })
        .unwrap();
    let version = a
        .session
        .update_subscriptions(|set| {
            set.add("by-name", "Item", "itemName == \"Write code\"");
        })
        .unwrap();
    let error = a.session.wait_for_subscriptions(version, TIMEOUT).expect_err("a rejected set");
    assert_eq!(error.code, ErrorCode::Sync, "{error}");
    assert!(error.message.contains("itemName"), "{error}");

    let subs = a.session.subscriptions().unwrap();
    assert_eq!(subs.version, version);
    assert_eq!(subs.state, SubscriptionState::Error);
    let message = subs.error.expect("the server's message");
    assert!(message.contains("itemName"), "{message}");

    let (id, reported, state) = rx.recv_timeout(TIMEOUT).expect("the handler got the rejection");
    assert_eq!(id, session_id);
    assert_eq!(reported.code, SyncError::SUBSCRIPTION_REJECTED);
    assert!(reported.message.contains("itemName"), "{reported}");
    assert_eq!(state.unwrap(), SubscriptionState::Error);

    // A later, valid set completes.
    let version = a
        .session
        .update_subscriptions(|set| {
            set.remove_all().add("items", "Item", "complexity <= 4");
        })
        .unwrap();
    a.session.wait_for_subscriptions(version, TIMEOUT).expect("a valid set completes");
    assert_eq!(a.session.subscriptions().unwrap().state, SubscriptionState::Complete);
}

#[test]
fn subscription_edits() {
    let server = Server::start();
    let a = Device::new(&server, Credentials::Anonymous);
    let initial = a.session.subscriptions().unwrap();
    assert!(initial.subscriptions.is_empty());

    let version = a
        .session
        .update_subscriptions(|set| {
            set.add("low", "Item", "complexity <= 4").add("high", "Item", "complexity > 8");
            set.add("low", "Item", "complexity <= 2"); // replaces by name
            assert!(set.remove("high"));
            assert!(!set.remove("never"));
            assert_eq!(set.subscriptions().unwrap().len(), 1);
        })
        .unwrap();
    assert!(version > initial.version);
    let subs = a.session.subscriptions().unwrap();
    assert_eq!(subs.version, version);
    assert_eq!(subs.subscriptions.len(), 1);
    assert_eq!(subs.subscriptions[0].query, "complexity <= 2");

    // A failed edit fails the whole update, and nothing changes.
    let error = a
        .session
        .update_subscriptions(|set| {
            set.remove_all();
            set.add("bad", "", "complexity <= 1");
            set.add("after", "Item", "complexity <= 1");
        })
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidArgument, "{error}");
    let after = a.session.subscriptions().unwrap();
    assert_eq!(after.version, version);
    assert_eq!(after.subscriptions, subs.subscriptions);

    let v2 = a
        .session
        .update_subscriptions(|set| {
            assert_eq!(set.remove_type("Item"), 1);
        })
        .unwrap();
    assert_eq!(v2, version + 1);
    assert!(a.session.subscriptions().unwrap().subscriptions.is_empty());
}

#[test]
fn login_errors_and_log_out() {
    let server = Server::start();
    let dir = TempDir::new("device");
    let (app, _) = new_app(&server, &dir);
    assert!(app.current_user().unwrap().is_none());

    let email = unique_email("bo");
    app.register_email(&email, "password123", TIMEOUT).unwrap();
    let error =
        app.log_in(Credentials::email_password(&email, "wrong-password"), TIMEOUT).unwrap_err();
    assert_eq!(error.code, ErrorCode::Auth, "{error}");

    let user = app.log_in(Credentials::email_password(&email, "password123"), TIMEOUT).unwrap();
    assert_eq!(app.current_user().unwrap().unwrap().id(), user.id());
    app.log_out(&user, TIMEOUT).unwrap();
    assert_eq!(user.state().unwrap(), UserState::LoggedOut);
    assert!(app.current_user().unwrap().is_none());
    // Still cached, as logged out.
    let users = app.users().unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(users[0].state().unwrap(), UserState::LoggedOut);
    let error = app.open_synced(&user, dir.file("x.ferry"), &item_schema()).unwrap_err();
    assert_eq!(error.code, ErrorCode::Auth, "{error}");

    // The user cache survives the App.
    drop(users);
    drop(app);
    let (app, _) = new_app(&server, &dir);
    let users = app.users().unwrap();
    assert_eq!(users.len(), 1);
    assert_eq!(users[0].id(), user.id());

    // A user of another App is refused.
    let other_dir = TempDir::new("device");
    let (other, _) = new_app(&server, &other_dir);
    let anon = other.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let error = app.open_synced(&anon, dir.file("y.ferry"), &item_schema()).unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidArgument, "{error}");
}

/// Regression: subscription updates on the host's thread and the loop thread's sync writes on
/// the same file (the client file identity right after open, downloads, set states) must wait
/// for each other, never fail with "already in a write transaction".
#[test]
fn update_subscriptions_right_after_open() {
    let server = Server::start();
    let dir = TempDir::new("device");
    let (app, errors) = new_app(&server, &dir);
    let user = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let mut failures = Vec::new();
    for i in 0..10 {
        let (session, _db) =
            app.open_synced(&user, dir.file(&format!("items-{i}.ferry")), &item_schema()).unwrap();
        // Keep the host writing subscription sets while the session connects.
        let result = (0..200)
            .try_fold(0, |_, n| {
                session.update_subscriptions(|set| {
                    set.add("items", "Item", &format!("complexity <= {n}"));
                })
            })
            .and_then(|version| session.wait_for_subscriptions(version, TIMEOUT));
        if let Err(e) = result {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 10 failed: {failures:?}; handler: {:?}",
        failures.len(),
        errors.all()
    );
}

/// ferry.h: a login gets FERRY_ERR_NETWORK when the server cannot be reached.
#[test]
fn an_unreachable_server_is_a_network_error() {
    let dir = TempDir::new("device");
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let app =
        App::new(AppOptions::new(APP_ID, format!("http://127.0.0.1:{closed_port}"), dir.path()))
            .unwrap();
    let error = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap_err();
    assert_eq!(error.code, ErrorCode::Network, "{error}");
}

#[test]
fn callbacks_run_on_the_loop_thread_and_may_drop_sessions() {
    let server = Server::start();
    let a = Device::new(&server, Credentials::Anonymous);
    a.subscribe("items", "complexity <= 4");

    // A callback-style login; a blocking wait inside a callback is refused, not a deadlock.
    let (tx, rx) = mpsc::channel();
    let app = a.app.clone();
    a.app
        .log_in_with_callback(&Credentials::Anonymous, move |user| {
            let on = thread::current().id();
            let blocking = app.log_in(Credentials::Anonymous, Duration::from_secs(1));
            tx.send((user.map(|u| u.id().to_owned()), on, blocking.map(|_| ()))).unwrap();
        })
        .unwrap();
    let (user, on, blocking) = rx.recv_timeout(TIMEOUT).expect("the login callback ran");
    assert!(user.unwrap() != a.user.id());
    assert_ne!(on, thread::current().id());
    assert_eq!(blocking.unwrap_err().code, ErrorCode::InvalidArgument);

    // A second session whose last owner is a completion closure: it is dropped on the loop
    // thread, and freed off it.
    let dir = TempDir::new("device");
    let (app2, _) = new_app(&server, &dir);
    let user2 = app2.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let (session2, db2) =
        app2.open_synced(&user2, dir.file("items.ferry"), &item_schema()).unwrap();
    drop(app2); // the session keeps the App alive
    let (tx, rx) = mpsc::channel();
    let (main_dropped, wait_for_main) = mpsc::channel::<()>();
    let s2 = Arc::new(session2);
    let s2_in_callback = Arc::clone(&s2);
    s2.wait_for_upload_with_callback(move |r| {
        // Wait (briefly blocking the loop, as a test may) until the main thread has dropped
        // its reference, so this drop is the last: on the loop thread.
        let _ = wait_for_main.recv_timeout(TIMEOUT);
        assert_eq!(Arc::strong_count(&s2_in_callback), 1);
        drop(s2_in_callback);
        tx.send(r).unwrap();
    })
    .unwrap();
    drop(s2);
    main_dropped.send(()).unwrap();
    rx.recv_timeout(TIMEOUT).expect("upload callback").expect("upload ok");
    // The database stays usable locally after its session and App are gone.
    let id = ObjectId::generate();
    db2.write(|tx| {
        tx.create(
            "Item",
            &[
                ("_id", id.into()),
                ("ownerId", user2.id().into()),
                ("itemName", "x".into()),
                ("complexity", 1.into()),
            ],
        )
    })
    .unwrap();
    assert!(db2.get("Item", id).unwrap().is_some());
}

#[test]
fn waits_time_out_and_pending_waits_end_when_the_session_goes() {
    let server = Server::start();
    let a = Device::new(&server, Credentials::Anonymous);
    // Nothing to wait for: completes well within the timeout.
    a.session.wait_for_upload(TIMEOUT).unwrap();
    // A version that does not exist yet cannot complete: the blocking wait times out.
    let error = a.session.wait_for_subscriptions(1_000, Duration::from_millis(300)).unwrap_err();
    assert_eq!(error.code, ErrorCode::Timeout, "{error}");
    // ...and a callback wait on it completes with Closed when the session is freed.
    let (tx, rx) = mpsc::channel();
    a.session.wait_for_subscriptions_with_callback(1_000, move |r| tx.send(r).unwrap()).unwrap();
    let Device { session, .. } = a;
    drop(session);
    let result = rx.recv_timeout(TIMEOUT).expect("the pending wait completed");
    assert_eq!(result.unwrap_err().code, ErrorCode::Closed);
}
