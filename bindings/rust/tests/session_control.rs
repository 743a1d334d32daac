//! Session control against a real `ferry-server` (`common::server`): connection state, suspend
//! and resume, progress notifiers, download before open with initial subscriptions, open
//! timeouts, in-memory synced databases, App options and reconnect. Every wait is on a
//! condition variable or channel with a timeout.

mod common;

use std::net::TcpListener;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::server::Server;
use common::{unique, TempDir};
use ferry::{
    App, AppOptions, ConnectionState, Credentials, Database, DownloadBeforeOpen, ErrorCode,
    LogLevel, ObjectId, Progress, ProgressDirection, ProgressMode, SessionState, SyncOptions,
    SyncSession, User,
};

use ConnectionState::{Connected, Connecting, Disconnected};

const APP_ID: &str = "item-app-seeds";
/// How long any one wait may take before the test fails (each test stays well under 20 s).
const TIMEOUT: Duration = Duration::from_secs(15);

use common::server::item_schema;

/// Calls recorded by a callback on the loop thread, waited for with a condition variable.
struct Recorder<T> {
    calls: Mutex<Vec<T>>,
    arrived: Condvar,
}

impl<T: Clone + std::fmt::Debug> Recorder<T> {
    fn new() -> Arc<Recorder<T>> {
        Arc::new(Recorder { calls: Mutex::new(Vec::new()), arrived: Condvar::new() })
    }

    fn push(&self, call: T) {
        self.calls.lock().unwrap().push(call);
        self.arrived.notify_all();
    }

    fn wait_for(&self, what: &str, timeout: Duration, done: impl Fn(&[T]) -> bool) -> Vec<T> {
        let calls = self.calls.lock().unwrap();
        let (calls, result) =
            self.arrived.wait_timeout_while(calls, timeout, |c| !done(c)).unwrap();
        assert!(!result.timed_out(), "timed out waiting for {what}; got {:?}", *calls);
        calls.clone()
    }

    fn all(&self) -> Vec<T> {
        self.calls.lock().unwrap().clone()
    }
}

fn unique_email(tag: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{}-{nanos}@example.com", unique(tag))
}

fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn new_app(url: &str, dir: &TempDir, tweak: impl FnOnce(&mut AppOptions)) -> App {
    let mut options = AppOptions::new(APP_ID, url, dir.path());
    options.log_level = LogLevel::Warn;
    tweak(&mut options);
    App::new(options).unwrap()
}

/// Logs in an email/password user (registered first when `register`).
fn log_in(app: &App, email: &str, register: bool) -> User {
    if register {
        app.register_email(email, "password123", TIMEOUT).expect("register");
    }
    app.log_in(Credentials::email_password(email, "password123"), TIMEOUT).expect("log in")
}

fn mine(set: &mut ferry::MutableSubscriptionSet) {
    set.add("items", "Item", "complexity <= 4");
}

fn create_item(db: &Database, owner: &str, name: &str, complexity: i64) -> ObjectId {
    let id = ObjectId::generate();
    db.write(|tx| {
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
    id
}

fn count(db: &Database) -> usize {
    db.query("Item", "TRUEPREDICATE", &[]).unwrap().len()
}

/// Opens `name` in the App's directory with the initial subscription `complexity <= 4`.
fn open_mine(app: &App, user: &User, dir: &TempDir, name: &str) -> (SyncSession, Database) {
    let schema = item_schema();
    let options = SyncOptions::new(dir.file(name), &schema).initial_subscriptions(mine);
    app.open_synced_with(user, &options, TIMEOUT).expect("open")
}

// --- Connection state, suspend and resume ------------------------------------------------------

#[test]
fn connection_state_follows_suspend_and_resume() {
    let server = Server::start();
    let dir = TempDir::new("device");
    let app = new_app(&server.url, &dir, |_| {});
    let user = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let (session, _db) = open_mine(&app, &user, &dir, "items.ferry");
    assert_eq!(session.state().unwrap(), SessionState::Active);
    session.wait_for_download(TIMEOUT).unwrap(); // connected now
    assert_eq!(session.connection_state().unwrap(), Connected);

    let states = Recorder::new();
    let sink = Arc::clone(&states);
    let caller = thread::current().id();
    let token = session
        .observe_connection_state(move |old, new| {
            assert_ne!(thread::current().id(), caller, "on Ferry's loop thread");
            sink.push((old, new));
        })
        .unwrap();
    session.suspend().unwrap();
    states.wait_for("disconnected after suspend", TIMEOUT, |c| {
        c.contains(&(Connected, Disconnected))
    });
    assert_eq!(session.state().unwrap(), SessionState::Paused);
    assert_eq!(session.connection_state().unwrap(), Disconnected);
    session.suspend().unwrap(); // a no-op when paused

    session.resume().unwrap();
    let calls = states.wait_for("connected after resume", TIMEOUT, |c| {
        c.last() == Some(&(Connecting, Connected))
    });
    assert_eq!(
        calls,
        [(Connected, Disconnected), (Disconnected, Connecting), (Connecting, Connected)]
    );
    assert_eq!(session.state().unwrap(), SessionState::Active);
    assert_eq!(session.connection_state().unwrap(), Connected);

    // A dropped token hears nothing more, and its closure is dropped (on the loop thread).
    drop(token);
    let probe = Recorder::new();
    let sink = Arc::clone(&probe);
    let _probe_token = session.observe_connection_state(move |o, n| sink.push((o, n))).unwrap();
    session.suspend().unwrap();
    session.resume().unwrap();
    probe.wait_for("reconnected", TIMEOUT, |c| c.last() == Some(&(Connecting, Connected)));
    assert_eq!(states.all().len(), 3);
    let deadline = Instant::now() + TIMEOUT;
    while Arc::strong_count(&states) > 1 {
        assert!(Instant::now() < deadline, "the dropped token's closure was never dropped");
        thread::yield_now(); // the closure goes on the loop thread, right after the drop
    }
}

#[test]
fn a_write_made_while_suspended_is_uploaded_after_resume() {
    let server = Server::start();
    let email = unique_email("pause");
    let (dir_a, dir_b) = (TempDir::new("device"), TempDir::new("device"));
    let (app_a, app_b) =
        (new_app(&server.url, &dir_a, |_| {}), new_app(&server.url, &dir_b, |_| {}));
    let user_a = log_in(&app_a, &email, true);
    let user_b = log_in(&app_b, &email, false);
    assert_eq!(user_a.id(), user_b.id());
    let (a, a_db) = open_mine(&app_a, &user_a, &dir_a, "items.ferry");
    let (b, b_db) = open_mine(&app_b, &user_b, &dir_b, "items.ferry");
    a.wait_for_subscriptions(1, TIMEOUT).unwrap();
    b.wait_for_subscriptions(1, TIMEOUT).unwrap();

    a.suspend().unwrap();
    let id = create_item(&a_db, user_a.id(), "written while paused", 2);
    let (tx, uploaded) = mpsc::channel();
    a.wait_for_upload_with_callback(move |r| tx.send(r).unwrap()).unwrap();
    // A full round trip of the other device: the server has nothing from the paused one, and
    // the paused one's wait stays pending.
    b.wait_for_upload(TIMEOUT).unwrap();
    b.wait_for_download(TIMEOUT).unwrap();
    assert!(b_db.get("Item", id).unwrap().is_none());
    assert!(uploaded.try_recv().is_err(), "an upload completed while paused");
    assert_eq!(a.state().unwrap(), SessionState::Paused);

    a.resume().unwrap();
    uploaded.recv_timeout(TIMEOUT).expect("the upload completed after resume").unwrap();
    b.wait_for_download(TIMEOUT).unwrap();
    let item = b_db.get("Item", id).unwrap().expect("the other device has the paused write");
    assert_eq!(item.get("itemName").unwrap(), "written while paused".into());
}

// --- Progress ----------------------------------------------------------------------------------

#[test]
fn upload_progress_for_current_work_is_monotonic_and_ends_at_one() {
    let server = Server::start();
    let dir = TempDir::new("device");
    let app = new_app(&server.url, &dir, |_| {});
    let user = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let (session, db) = open_mine(&app, &user, &dir, "items.ferry");
    session.wait_for_download(TIMEOUT).unwrap();
    session.suspend().unwrap();
    for i in 0..2000 {
        create_item(&db, user.id(), &format!("item {i}"), i % 5);
    }

    let reports: Arc<Recorder<Progress>> = Recorder::new();
    let sink = Arc::clone(&reports);
    let token = session
        .observe_progress(ProgressDirection::Upload, ProgressMode::ForCurrentWork, move |p| {
            sink.push(p)
        })
        .unwrap();
    let first = reports.wait_for("the first report", TIMEOUT, |c| !c.is_empty())[0];
    assert!(first.progress_estimate < 1.0 && first.transferable_bytes > 0, "{first:?}");
    session.resume().unwrap();
    let got =
        reports.wait_for("progress 1.0", TIMEOUT, |c| c.last().is_some_and(|p| p.is_complete()));
    session.wait_for_upload(TIMEOUT).unwrap();
    assert_eq!(got, reports.all(), "nothing after 1.0: the notifier stopped by itself");
    let estimates: Vec<f64> = got.iter().map(|p| p.progress_estimate).collect();
    assert!(estimates.windows(2).all(|w| w[0] <= w[1]), "not monotonic: {estimates:?}");
    assert!(estimates.iter().all(|e| (0.0..=1.0).contains(e)), "{estimates:?}");
    assert_eq!(estimates.iter().filter(|&&e| e == 1.0).count(), 1);
    let last = *got.last().unwrap();
    assert_eq!(last.progress_estimate, 1.0);
    assert_eq!(last.transferred_bytes, last.transferable_bytes);
    assert_eq!(last.transferable_bytes, first.transferable_bytes);
    drop(token);

    // Nothing outstanding: a single report of 1.0.
    let (tx, rx) = mpsc::channel();
    let _idle = session
        .observe_progress(ProgressDirection::Download, ProgressMode::ForCurrentWork, move |p| {
            let _ = tx.send(p);
        })
        .unwrap();
    assert!(rx.recv_timeout(TIMEOUT).unwrap().is_complete());
}

#[test]
fn a_token_may_be_dropped_inside_its_own_callback() {
    let server = Server::start();
    let dir = TempDir::new("device");
    let app = new_app(&server.url, &dir, |_| {});
    let user = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let (session, _db) = open_mine(&app, &user, &dir, "items.ferry");
    session.wait_for_download(TIMEOUT).unwrap(); // connected: no change comes by itself

    let slot: Arc<Mutex<Option<ferry::ConnectionStateToken>>> = Arc::new(Mutex::new(None));
    let calls = Recorder::new();
    let (in_callback, sink) = (Arc::clone(&slot), Arc::clone(&calls));
    let token = session
        .observe_connection_state(move |old, new| {
            sink.push((old, new));
            let token = in_callback.lock().unwrap().take();
            drop(token); // unregisters from inside its own callback
        })
        .unwrap();
    *slot.lock().unwrap() = Some(token);
    session.suspend().unwrap();
    calls.wait_for("the first change", TIMEOUT, |c| !c.is_empty());
    let seen = Recorder::new();
    let sink = Arc::clone(&seen);
    let _other = session.observe_connection_state(move |o, n| sink.push((o, n))).unwrap();
    session.resume().unwrap();
    seen.wait_for("reconnected", TIMEOUT, |c| c.last() == Some(&(Connecting, Connected)));
    assert_eq!(calls.all(), [(Connected, Disconnected)]);
    assert!(slot.lock().unwrap().is_none());
}

// --- Opening -----------------------------------------------------------------------------------

#[test]
fn open_async_downloading_first_has_the_other_devices_data() {
    let server = Server::start();
    let email = unique_email("first");
    let writer_dir = TempDir::new("device");
    let writer_app = new_app(&server.url, &writer_dir, |_| {});
    let writer_user = log_in(&writer_app, &email, true);
    let (writer, writer_db) = open_mine(&writer_app, &writer_user, &writer_dir, "items.ferry");
    for i in 0..20 {
        create_item(&writer_db, writer_user.id(), &format!("from the writer {i}"), i % 5);
    }
    writer.wait_for_upload(TIMEOUT).unwrap();

    let dir = TempDir::new("device");
    let app = new_app(&server.url, &dir, |_| {});
    let user = log_in(&app, &email, false);
    let schema = item_schema();
    let ran_on = Mutex::new(Vec::new());
    let options = SyncOptions::new(dir.file("first.ferry"), &schema)
        .download_before_open(DownloadBeforeOpen::Always)
        .initial_subscriptions(|set| {
            ran_on.lock().unwrap().push(thread::current().id());
            mine(set);
        });
    let (tx, rx) = mpsc::channel();
    app.open_async(&user, &options, move |result| {
        // At completion, on the loop thread, before any other wait.
        let result = result.map(|(session, db)| {
            let n = count(&db);
            let subs = session.subscriptions().unwrap();
            (session, db, n, subs)
        });
        tx.send(result).unwrap();
    })
    .unwrap();
    assert_eq!(*ran_on.lock().unwrap(), [thread::current().id()], "on the opening thread");
    let (session, db, n, subs) = rx.recv_timeout(TIMEOUT).expect("the open completed").unwrap();
    assert_eq!(n, 20);
    assert_eq!(subs.state, ferry::SubscriptionState::Complete);
    assert_eq!(subs.subscriptions.len(), 1);
    drop((session, db));

    // Blocking, downloading first again; the set exists, so the initial subscriptions do not
    // run again unless asked to.
    ran_on.lock().unwrap().clear();
    let (again, again_db) = app.open_synced_with(&user, &options, TIMEOUT).unwrap();
    assert_eq!(count(&again_db), 20);
    assert!(ran_on.lock().unwrap().is_empty());
    assert_eq!(again.subscriptions().unwrap().version, 1);
    drop((again, again_db));
    let rerun = SyncOptions::new(dir.file("first.ferry"), &schema)
        .download_before_open(DownloadBeforeOpen::Once)
        .rerun_initial_subscriptions(true)
        .initial_subscriptions(mine);
    let (rerun_session, _db) = app.open_synced_with(&user, &rerun, TIMEOUT).unwrap();
    assert_eq!(rerun_session.subscriptions().unwrap().version, 2);
}

#[test]
fn an_abandoned_open_drops_the_late_session() {
    let server = Server::start();
    let dir = TempDir::new("device");
    let app = new_app(&server.url, &dir, |_| {});
    let user = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let schema = item_schema();
    let options = SyncOptions::new(dir.file("late.ferry"), &schema)
        .download_before_open(DownloadBeforeOpen::Always)
        .initial_subscriptions(mine);
    // The wait gives up at once; the session that opens later is dropped on the loop thread
    // (and freed off it).
    let error = app.open_synced_with(&user, &options, Duration::ZERO).unwrap_err();
    assert_eq!(error.code, ErrorCode::Timeout);
    let (session, db) = app.open_synced_with(&user, &options, TIMEOUT).unwrap();
    assert_eq!(session.subscriptions().unwrap().version, 1);
    create_item(&db, user.id(), "after an abandoned open", 1);
    session.wait_for_upload(TIMEOUT).unwrap();
}

#[test]
fn download_before_open_against_a_closed_port_times_out() {
    let server = Server::start();
    let dir = TempDir::new("device");
    // A user cached by a login against the real server...
    let user_id = {
        let online = new_app(&server.url, &dir, |_| {});
        let id = online.log_in(Credentials::Anonymous, TIMEOUT).unwrap().id().to_owned();
        id
    };
    // ...then the same device with the server unreachable.
    let app = new_app(&format!("http://127.0.0.1:{}", closed_port()), &dir, |_| {});
    let user = app.current_user().unwrap().expect("the cached user");
    assert_eq!(user.id(), user_id);
    let schema = item_schema();
    let options = SyncOptions::new(dir.file("x.ferry"), &schema)
        .download_before_open(DownloadBeforeOpen::Always)
        .open_timeout(Duration::from_millis(1000));
    let start = Instant::now();
    let error = app.open_synced_with(&user, &options, TIMEOUT).unwrap_err();
    assert_eq!(error.code, ErrorCode::Timeout, "{error}");
    assert!(error.message.contains("1000 ms"), "{error}");
    assert!(start.elapsed() < Duration::from_secs(10));

    // The completion form gets the same error on the loop thread.
    let (tx, rx) = mpsc::channel();
    app.open_async(&user, &options, move |r| tx.send(r.map(|_| ())).unwrap()).unwrap();
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap().unwrap_err().code, ErrorCode::Timeout);

    // Never: opens at once, offline.
    let (offline, db) = app.open_synced(&user, dir.file("x.ferry"), &schema).unwrap();
    assert_ne!(offline.connection_state().unwrap(), Connected);
    create_item(&db, user.id(), "offline", 1);
    assert_eq!(count(&db), 1);
}

#[test]
fn failed_initial_subscriptions_fail_the_open() {
    let server = Server::start();
    let dir = TempDir::new("device");
    let app = new_app(&server.url, &dir, |_| {});
    let user = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let schema = item_schema();

    // A failed edit: its own error, not libferry's generic one.
    let bad_edit = SyncOptions::new(dir.file("bad.ferry"), &schema).initial_subscriptions(|set| {
        set.add("items", "", "complexity <= 4");
    });
    let error = app.open_synced_with(&user, &bad_edit, TIMEOUT).unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidArgument, "{error}");
    assert!(!error.message.contains("callback returned"), "{error}");

    // A panic: an error, and on the async path the completion gets it.
    let panics = SyncOptions::new(dir.file("bad.ferry"), &schema)
        .download_before_open(DownloadBeforeOpen::Always)
        .initial_subscriptions(|_| panic!("no subscriptions today"));
    let (tx, rx) = mpsc::channel();
    app.open_async(&user, &panics, move |r| tx.send(r.map(|_| ())).unwrap()).unwrap();
    let error = rx.recv_timeout(TIMEOUT).unwrap().unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidArgument);
    assert!(error.message.contains("no subscriptions today"), "{error}");

    // The file is fine afterwards.
    let (session, _db) = open_mine(&app, &user, &dir, "bad.ferry");
    assert_eq!(session.subscriptions().unwrap().version, 1);
    // A zero open timeout is the library's invalid argument.
    let zero = SyncOptions::new(dir.file("zero.ferry"), &schema).open_timeout(Duration::ZERO);
    assert_eq!(
        app.open_synced_with(&user, &zero, TIMEOUT).unwrap_err().code,
        ErrorCode::InvalidArgument
    );
}

#[test]
fn an_in_memory_synced_database_creates_no_file() {
    let server = Server::start();
    let email = unique_email("memory");
    let writer_dir = TempDir::new("device");
    let writer_app = new_app(&server.url, &writer_dir, |_| {});
    let writer_user = log_in(&writer_app, &email, true);
    let (writer, writer_db) = open_mine(&writer_app, &writer_user, &writer_dir, "items.ferry");

    let dir = TempDir::new("device");
    let app = new_app(&server.url, &dir, |_| {});
    let user = log_in(&app, &email, false);
    let listing = || {
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing();
    let identifier = dir.file(&unique("memory"));
    let schema = item_schema();
    let options =
        SyncOptions::in_memory(identifier.to_string_lossy(), &schema).initial_subscriptions(mine);
    let (session, db) = app.open_synced_with(&user, &options, TIMEOUT).expect("open in memory");
    let id = create_item(&db, user.id(), "from memory", 1);
    session.wait_for_upload(TIMEOUT).unwrap();
    writer.wait_for_download(TIMEOUT).unwrap();
    assert!(writer_db.get("Item", id).unwrap().is_some());
    assert_eq!(listing(), before);
    assert!(!identifier.exists());
}

// --- App options and reconnect -----------------------------------------------------------------

#[test]
fn reconnect_is_harmless_when_connected() {
    let server = Server::start();
    let dir = TempDir::new("device");
    let app = new_app(&server.url, &dir, |o| {
        o.multiplex_sessions = false;
        o.read_timeout = Duration::from_secs(30);
        o.ping_interval = Duration::from_secs(5);
        o.reconnect_delay_min = Duration::from_millis(200);
        o.reconnect_delay_max = Duration::from_secs(2);
    });
    let user = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let (one, one_db) = open_mine(&app, &user, &dir, "one.ferry");
    let (two, two_db) = open_mine(&app, &user, &dir, "two.ferry");
    for s in [&one, &two] {
        s.wait_for_upload(TIMEOUT).unwrap();
        s.wait_for_download(TIMEOUT).unwrap();
    }
    let states = Recorder::new();
    let sink = Arc::clone(&states);
    let _token = one.observe_connection_state(move |o, n| sink.push((o, n))).unwrap();
    app.reconnect().unwrap();
    app.reconnect().unwrap();
    let id = create_item(&one_db, user.id(), "after reconnect", 1);
    one.wait_for_upload(TIMEOUT).unwrap();
    two.wait_for_download(TIMEOUT).unwrap();
    assert!(two_db.get("Item", id).unwrap().is_some());
    assert_eq!(one.connection_state().unwrap(), Connected);
    assert_eq!(states.all(), [], "the connection was never dropped");
}

#[test]
fn reconnect_retries_at_once_after_a_failed_connection() {
    let server = Server::start();
    let dir = TempDir::new("device");
    {
        let online = new_app(&server.url, &dir, |_| {});
        online.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    }
    // The test ends the connection attempt itself: it waits in this listener's queue until the
    // test accepts and drops it, so the failure comes after the observer is registered. (With
    // a port nothing listens on, the refusal could come before, and no transition was seen.)
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (accepted, attempts) = mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if accepted.send(stream).is_err() {
                break;
            }
        }
    });
    // A backoff of a minute: a retry seen within the test is the reconnect's.
    let app = new_app(&format!("http://127.0.0.1:{port}"), &dir, |o| {
        o.reconnect_delay_min = Duration::from_secs(60);
        o.reconnect_delay_max = Duration::from_secs(60);
    });
    let user = app.current_user().unwrap().unwrap();
    let (session, _db) = app.open_synced(&user, dir.file("offline.ferry"), &item_schema()).unwrap();
    let states = Recorder::new();
    let sink = Arc::clone(&states);
    let _token = session.observe_connection_state(move |o, n| sink.push((o, n))).unwrap();
    drop(attempts.recv_timeout(TIMEOUT).expect("the session's connection attempt"));
    let failed = states
        .wait_for("the failed connection", TIMEOUT, |c| c.iter().any(|&(_, n)| n == Disconnected))
        .len();
    app.reconnect().unwrap();
    states.wait_for("a retry after reconnect", Duration::from_secs(5), |c| {
        c[failed..].contains(&(Disconnected, Connecting))
    });
    assert_eq!(session.state().unwrap(), SessionState::Active);
}

#[test]
fn bad_app_options_are_rejected() {
    let dir = TempDir::new("device");
    let url = "http://127.0.0.1:1";
    let bad = |tweak: fn(&mut AppOptions)| {
        let mut o = AppOptions::new(APP_ID, url, dir.path());
        tweak(&mut o);
        App::new(o).unwrap_err().code
    };
    assert_eq!(
        bad(|o| {
            o.reconnect_delay_min = Duration::from_secs(5);
            o.reconnect_delay_max = Duration::from_secs(1);
        }),
        ErrorCode::InvalidArgument
    );
    assert_eq!(bad(|o| o.read_timeout = Duration::ZERO), ErrorCode::InvalidArgument);
    assert_eq!(bad(|o| o.ping_interval = Duration::ZERO), ErrorCode::InvalidArgument);
    let app = new_app(url, &dir, |o| o.multiplex_sessions = false);
    app.reconnect().unwrap(); // nothing to reconnect
}

// --- write_copy ------------------------------------------------------------------------------

#[test]
fn write_copy_opens_for_another_user() {
    let server = Server::start();
    let (dir_a, dir_b) = (TempDir::new("device"), TempDir::new("device"));
    let (app_a, app_b) =
        (new_app(&server.url, &dir_a, |_| {}), new_app(&server.url, &dir_b, |_| {}));
    let user_a = log_in(&app_a, &unique_email("copy-a"), true);
    let user_b = log_in(&app_b, &unique_email("copy-b"), true);
    let (a, a_db) = open_mine(&app_a, &user_a, &dir_a, "source.ferry");
    create_item(&a_db, user_a.id(), "copied", 1);
    a.wait_for_upload(TIMEOUT).unwrap();
    let target = dir_b.file("copy.ferry");
    a.write_copy(&target).unwrap();
    let again = a.write_copy(&target).unwrap_err();
    assert_eq!(again.code, ferry::ErrorCode::InvalidArgument);
    let schema = item_schema();
    let (_copy, copy_db) =
        app_b.open_synced_with(&user_b, &SyncOptions::new(target, &schema), TIMEOUT).unwrap();
    assert_eq!(count(&copy_db), 1);
}
