//! Notifications: closures on queries and objects, tokens, loop and poll delivery.
//!
//! No test sleeps and hopes: notifications are awaited with `recv_timeout`, and "no more
//! notifications" is proven by the closure having been dropped (its channel disconnects).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;

use common::*;
use ferry::{
    ChangeSet, Database, Delivery, ErrorCode, NotificationToken, ObjectId, Options, Value,
};

fn recv(rx: &Receiver<ChangeSet>) -> ChangeSet {
    rx.recv_timeout(NOTIFY_TIMEOUT).expect("a notification within the timeout")
}

fn item(id: ObjectId, complexity: i64) -> [(&'static str, Value); 2] {
    [("_id", id.into()), ("complexity", complexity.into())]
}

/// Observes `query` on Item with a closure that forwards every change set to the receiver.
fn observe(db: &Database, query: &str, args: &[Value]) -> (NotificationToken, Receiver<ChangeSet>) {
    let (tx, rx) = mpsc::channel();
    let token = db
        .observe_query("Item", query, args, move |changes: &ChangeSet| {
            let _ = tx.send(changes.clone());
        })
        .unwrap();
    (token, rx)
}

#[test]
fn query_notification_through_a_closure() {
    let db = memory_db(Delivery::Loop);
    let (a, b) = (ObjectId::generate(), ObjectId::generate());
    let (_token, rx) = observe(&db, "complexity <= $0", &[Value::Int(4)]);

    db.write(|tx| tx.create("Item", &item(a, 3))).unwrap();
    let changes = recv(&rx);
    assert_eq!(changes.inserted, vec![Value::ObjectId(a)]);
    assert!(changes.deleted.is_empty() && changes.modified.is_empty());

    // An object that does not match is not reported: the next change set holds only `b`.
    db.write(|tx| tx.create("Item", &item(ObjectId::generate(), 9))).unwrap();
    db.write(|tx| tx.create("Item", &item(b, 1))).unwrap();
    let changes = recv(&rx);
    assert_eq!(changes.inserted, vec![Value::ObjectId(b)]);

    // A change to an object in the results: modified, with the property's name.
    db.write(|tx| tx.set("Item", a, "itemName", "renamed")).unwrap();
    let changes = recv(&rx);
    assert_eq!(changes.modified, vec![Value::ObjectId(a)]);
    assert_eq!(changes.modified_properties, vec!["itemName".to_string()]);
    assert!(changes.inserted.is_empty() && changes.deleted.is_empty());

    // Leaving the results, and being deleted, are deletions.
    db.write(|tx| tx.set("Item", a, "complexity", 10)).unwrap();
    assert_eq!(recv(&rx).deleted, vec![Value::ObjectId(a)]);
    db.write(|tx| tx.delete("Item", b)).unwrap();
    assert_eq!(recv(&rx).deleted, vec![Value::ObjectId(b)]);
}

#[test]
fn query_notification_from_another_handle_and_thread() {
    let schema = schema();
    let name = unique("notify-other");
    let observer = Database::open(&Options::in_memory(&name).schema(&schema)).unwrap();
    let (_token, rx) = observe(&observer, "ownerId == $0", &["zoe".into()]);
    let id = ObjectId::generate();
    thread::scope(|s| {
        s.spawn(|| {
            let writer = Database::open(&Options::in_memory(&name).schema(&schema)).unwrap();
            writer
                .write(|tx| tx.create("Item", &[("_id", id.into()), ("ownerId", "zoe".into())]))
                .unwrap();
        });
    });
    assert_eq!(recv(&rx).inserted, vec![Value::ObjectId(id)]);
}

#[test]
fn object_notification() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    let (tx, rx) = mpsc::channel();
    // The object need not exist yet.
    let _token = db
        .observe_object("Item", id, move |changes| {
            let _ = tx.send(changes.clone());
        })
        .unwrap();

    db.write(|tx| tx.create("Item", &item(id, 1))).unwrap();
    assert_eq!(recv(&rx).inserted, vec![Value::ObjectId(id)]);

    db.write(|tx| {
        tx.set("Item", id, "itemName", "x")?;
        tx.add_int("Item", id, "counter", 2)
    })
    .unwrap();
    let changes = recv(&rx);
    assert_eq!(changes.modified, vec![Value::ObjectId(id)]);
    let mut props = changes.modified_properties.clone();
    props.sort();
    assert_eq!(props, vec!["counter".to_string(), "itemName".to_string()]);

    // Another object's changes are not reported.
    db.write(|tx| tx.create("Item", &item(ObjectId::generate(), 1))).unwrap();
    db.write(|tx| tx.delete("Item", id)).unwrap();
    let changes = recv(&rx);
    assert_eq!(changes.deleted, vec![Value::ObjectId(id)]);
    assert!(changes.inserted.is_empty() && changes.modified.is_empty());

    expect_err(db.observe_object("Item", "wrong type", |_| {}), ErrorCode::WrongType);
    expect_err(db.observe_object("Nope", id, |_| {}), ErrorCode::NoSuchClass);
}

#[test]
fn a_dropped_token_stops_notifications() {
    let db = memory_db(Delivery::Loop);
    let (kept, kept_rx) = observe(&db, "TRUEPREDICATE", &[]);
    let (dropped, dropped_rx) = observe(&db, "TRUEPREDICATE", &[]);

    db.write(|tx| tx.create("Item", &item(ObjectId::generate(), 1))).unwrap();
    recv(&kept_rx);
    recv(&dropped_rx);

    drop(dropped);
    // The token's free has dropped the closure, and with it the only Sender: the channel is
    // disconnected, so the callback can never run again.
    assert_eq!(dropped_rx.recv_timeout(NOTIFY_TIMEOUT), Err(RecvTimeoutError::Disconnected));

    // The other registration still works.
    let id = ObjectId::generate();
    db.write(|tx| tx.create("Item", &item(id, 2))).unwrap();
    assert_eq!(recv(&kept_rx).inserted, vec![Value::ObjectId(id)]);
    drop(kept);
    assert_eq!(kept_rx.recv_timeout(NOTIFY_TIMEOUT), Err(RecvTimeoutError::Disconnected));
}

/// Counts drops, so tests can check that libferry's userdata_free ran exactly once.
struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn the_closure_is_freed_exactly_once() {
    let db = memory_db(Delivery::Loop);

    // Failing registrations free the closure before returning.
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropCounter(drops.clone());
    let result = db.observe_query("Item", "complexity <=", &[], move |_| {
        let _ = &guard;
    });
    expect_err(result, ErrorCode::Query);
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropCounter(drops.clone());
    let result = db.observe_object("Item", 42, move |_| {
        let _ = &guard;
    });
    expect_err(result, ErrorCode::WrongType);
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    // A successful one frees it when the token goes.
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = DropCounter(drops.clone());
    let token = db
        .observe_query("Item", "TRUEPREDICATE", &[], move |_| {
            let _ = &guard;
        })
        .unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(token);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn a_token_may_be_freed_inside_its_callback() {
    let db = memory_db(Delivery::Loop);
    let slot: Arc<Mutex<Option<NotificationToken>>> = Arc::new(Mutex::new(None));
    let (tx, rx) = mpsc::channel::<ChangeSet>();
    let inner_slot = slot.clone();
    // Hold the slot's lock while registering, so the callback cannot run before it is filled.
    let mut filled = slot.lock().unwrap();
    *filled = Some(
        db.observe_query("Item", "TRUEPREDICATE", &[], move |changes| {
            let token = inner_slot.lock().unwrap().take();
            drop(token); // unregisters from inside the callback
            let _ = tx.send(changes.clone());
        })
        .unwrap(),
    );
    drop(filled);

    db.write(|tx| tx.create("Item", &item(ObjectId::generate(), 1))).unwrap();
    recv(&rx);
    // The closure (and its Sender) is dropped once the callback has returned.
    assert_eq!(rx.recv_timeout(NOTIFY_TIMEOUT), Err(RecvTimeoutError::Disconnected));
    assert!(slot.lock().unwrap().is_none());
}

#[test]
fn a_panicking_callback_does_not_crash_the_host() {
    let db = memory_db(Delivery::Loop);
    let (tx, rx) = mpsc::channel();
    let mut calls = 0;
    let _token = db
        .observe_query("Item", "TRUEPREDICATE", &[], move |changes| {
            calls += 1;
            let _ = tx.send(changes.clone());
            if calls == 1 {
                panic!("the first notification panics (expected in this test)");
            }
        })
        .unwrap();
    db.write(|tx| tx.create("Item", &item(ObjectId::generate(), 1))).unwrap();
    recv(&rx); // the first call, which then panics
    let id = ObjectId::generate();
    db.write(|tx| tx.create("Item", &item(id, 2))).unwrap();
    // The panic was caught, and the closure is called again.
    assert_eq!(recv(&rx).inserted, vec![Value::ObjectId(id)]);
}

#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}

extern "C" {
    fn poll(fds: *mut PollFd, nfds: std::os::raw::c_ulong, timeout: i32) -> i32;
}

const POLLIN: i16 = 1;

fn wait_readable(fd: i32) -> bool {
    let mut p = PollFd { fd, events: POLLIN, revents: 0 };
    let n = unsafe { poll(&mut p, 1, NOTIFY_TIMEOUT.as_millis() as i32) };
    n == 1 && p.revents & POLLIN != 0
}

fn readable_now(fd: i32) -> bool {
    let mut p = PollFd { fd, events: POLLIN, revents: 0 };
    unsafe { poll(&mut p, 1, 0) == 1 }
}

#[test]
fn poll_delivery_runs_callbacks_on_the_calling_thread() {
    let db = memory_db(Delivery::Poll);
    assert_eq!(db.delivery(), Delivery::Poll);
    let fd = db.notification_fd().unwrap();
    assert!(fd >= 0);
    assert_eq!(db.deliver_notifications().unwrap(), 0);

    let (tx, rx) = mpsc::channel();
    let _token = db
        .observe_query("Item", "complexity > 0", &[], move |changes| {
            let _ = tx.send((thread::current().id(), changes.clone()));
        })
        .unwrap();
    let id = ObjectId::generate();
    db.write(|tx| tx.create("Item", &item(id, 5))).unwrap();

    assert!(wait_readable(fd), "the descriptor becomes readable after the commit");
    assert!(rx.try_recv().is_err(), "nothing runs before deliver_notifications");
    assert_eq!(db.deliver_notifications().unwrap(), 1);
    let (thread_id, changes) = rx.try_recv().expect("delivered during the call");
    assert_eq!(thread_id, thread::current().id());
    assert_eq!(changes.inserted, vec![Value::ObjectId(id)]);
    assert!(!readable_now(fd), "delivering clears the readiness");
    assert_eq!(db.deliver_notifications().unwrap(), 0);

    db.close().unwrap();
    expect_err(db.deliver_notifications(), ErrorCode::Closed);
}

#[test]
fn poll_functions_on_a_loop_database_are_invalid() {
    let db = memory_db(Delivery::Loop);
    expect_err(db.notification_fd(), ErrorCode::InvalidArgument);
    expect_err(db.deliver_notifications(), ErrorCode::InvalidArgument);
}

#[test]
fn closing_stops_notifications_and_tokens_may_outlive_the_database() {
    let schema = schema();
    let name = unique("close-notify");
    let writer = Database::open(&Options::in_memory(&name).schema(&schema)).unwrap();
    let db = Database::open(&Options::in_memory(&name).schema(&schema)).unwrap();
    let (token, rx) = observe(&db, "TRUEPREDICATE", &[]);
    let (_witness, witness_rx) = observe(&writer, "TRUEPREDICATE", &[]);

    db.close().unwrap();
    writer.write(|tx| tx.create("Item", &item(ObjectId::generate(), 1))).unwrap();
    recv(&witness_rx); // the commit's notifications have been delivered...
    assert!(rx.try_recv().is_err(), "...but not to the closed handle's registration");

    drop(db); // the token outlives its database
    drop(token);
    assert_eq!(rx.recv_timeout(NOTIFY_TIMEOUT), Err(RecvTimeoutError::Disconnected));
}
