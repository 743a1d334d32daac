//! Safe Rust binding of Ferry, an offline-first device-sync engine.
//!
//! Ferry stores objects in a local database (a file, or memory), queries them, tells the host
//! what changed after each commit, and records every write transaction in a history that sync
//! uploads. This crate wraps the C interface of `libferry.so` (`include/ferry.h`, mirrored in
//! [`sys`]) in safe types:
//!
//! - every fallible call returns [`Result`], whose [`Error`] carries an [`ErrorCode`] for each
//!   `FERRY_ERR_*` and libferry's message;
//! - handles ([`Schema`], [`Database`], [`Object`], [`Results`], [`NotificationToken`]) are
//!   freed by `Drop`;
//! - notification callbacks are closures;
//! - classes and properties are named by their names;
//! - sync ([`App`], [`User`], [`SyncSession`], subscriptions, [`SyncError`]) offers blocking
//!   calls with timeouts, and `_with_callback` variants whose closures run on Ferry's loop
//!   thread; sessions report their [`ConnectionState`] and [`SessionState`], pause and
//!   resume, and report [`Progress`] to closures held by tokens that unregister on drop;
//!   [`SyncOptions`] open with a download first ([`App::open_async`]), initial subscriptions
//!   or in memory;
//! - client reset: [`SyncOptions::client_reset_mode`] ([`ClientResetMode`]), closures that see
//!   the database before and after a reset ([`SyncOptions::before_reset`],
//!   [`SyncOptions::after_reset`], [`Database::write_copy`]), the [`ClientResetReport`] in
//!   [`SyncError`], and manual resets with [`App::handle_client_reset`].
//!
//! # Example
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use ferry::{ClassSchema, Database, ObjectId, Options, Property, PropertyType, Schema, Value};
//!
//! # fn main() -> ferry::Result<()> {
//! let schema = Schema::new([ClassSchema::new("Item")
//!     .property(Property::primary_key(PropertyType::ObjectId))
//!     .property(Property::new("ownerId", PropertyType::String).indexed())
//!     .property(Property::new("itemName", PropertyType::String))
//!     .property(Property::new("complexity", PropertyType::Int))])?;
//! let db = Database::open(&Options::in_memory("crate-doc-example").schema(&schema))?;
//!
//! // Notifications arrive on Ferry's loop thread; a channel brings them back here.
//! let (tx, rx) = mpsc::channel();
//! let token = db.observe_query("Item", "complexity <= $0", &[Value::Int(4)], move |changes| {
//!     let _ = tx.send(changes.clone());
//! })?;
//!
//! let id = ObjectId::generate();
//! db.write(|tx| {
//!     tx.create("Item", &[
//!         ("_id", id.into()),
//!         ("ownerId", "alice".into()),
//!         ("itemName", "write the docs".into()),
//!         ("complexity", 3.into()),
//!     ])
//! })?;
//!
//! let results = db.query("Item", "ownerId == $0 SORT(complexity ASC)", &["alice".into()])?;
//! assert_eq!(results.len(), 1);
//! assert_eq!(results.get(0)?.get("itemName")?, Value::from("write the docs"));
//!
//! let changes = rx.recv_timeout(Duration::from_secs(10)).expect("a notification");
//! assert_eq!(changes.inserted, vec![Value::ObjectId(id)]);
//! drop(token); // unregisters
//! # Ok(()) }
//! ```
//!
//! # Threads
//!
//! Every libferry function may be called from any thread, so [`Database`] is `Send + Sync`.
//! Notification callbacks run on Ferry's loop thread ([`Delivery::Loop`], the default) or on
//! the thread calling [`Database::deliver_notifications`] ([`Delivery::Poll`]), so they must
//! be `Send`. A panic in a callback is caught at the C boundary and reported on stderr.
//!
//! # Linking
//!
//! `build.rs` links `libferry.so` from `$FERRY_LIB_DIR` (default: `../../build` relative to
//! this crate, where CMake puts it) and sets that directory as the rpath of this package's
//! tests and examples.

#![warn(missing_docs)]

mod app;
mod completion;
mod db;
mod error;
mod notify;
mod open;
mod precheck;
mod receipt;
mod remote;
mod reset;
mod reverted;
mod schema;
mod session;
mod sync;
pub mod sys;
mod value;

pub use app::{App, AppOptions, Credentials, LogLevel, Logger, User, UserState};

pub use db::{Database, Delivery, Field, Object, Options, Results, ResultsIter, Transaction};
pub use error::{Error, ErrorCode, Result};
pub use notify::{ChangeSet, NotificationToken};
pub use open::{DownloadBeforeOpen, SyncOptions};
pub use precheck::PrecheckMode;
pub use receipt::{Receipt, ReceiptState};
pub use remote::{RemoteDocument, REMOTE_FIND_MAX_LIMIT};
pub use reset::{ClientResetEntry, ClientResetMode, ClientResetOutcome, ClientResetReport};
pub use reverted::{LocalWrite, RevertKind, RevertedObject, RevertedValue, WriteKind};
pub use schema::{ClassSchema, Property, PropertyType, Schema};
pub use session::{
    ConnectionState, ConnectionStateToken, Progress, ProgressDirection, ProgressMode,
    ProgressToken, SessionState,
};
pub use sync::{
    CompensatingWrite, MutableSubscriptionSet, SessionId, SessionRef, Subscription,
    SubscriptionState, Subscriptions, SyncAction, SyncError, SyncSession,
};
pub use value::{ObjectId, Value};

/// The library's version, `"MAJOR.MINOR.PATCH"` (`ferry_version`).
pub fn version() -> &'static str {
    // SAFETY: ferry_version returns static storage, never NULL.
    unsafe { error::static_str(sys::ferry_version()) }
}

/// The library's version as `MAJOR * 10000 + MINOR * 100 + PATCH` (`ferry_version_number`).
pub fn version_number() -> i32 {
    // SAFETY: no arguments, no preconditions.
    unsafe { sys::ferry_version_number() }
}

/// The version of `ferry.h` this crate was written against, as `version_number()` encodes it.
pub const HEADER_VERSION_NUMBER: i32 =
    sys::FERRY_VERSION_MAJOR * 10000 + sys::FERRY_VERSION_MINOR * 100 + sys::FERRY_VERSION_PATCH;
