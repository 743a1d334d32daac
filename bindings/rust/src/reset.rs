//! Client reset (`ferry_client_reset_*`, SPEC F-RESET): what a session does when the server can
//! no longer sync with the device's file, the report of a finished reset, and the before and
//! after closures.
//!
//! The closures are boxed behind an `Arc` that the [`SyncOptions`](crate::SyncOptions) hold;
//! every open clones it into what it returns (the [`SyncSession`](crate::SyncSession), or the
//! completion of an asynchronous open until it builds the session), because libferry needs the
//! userdata until the session is freed: the session drops its reference only after
//! `ferry_sync_session_free` returned. The raw userdata pointer is the `Arc`'s content.
//!
//! The database handles libferry lends to the closures are wrapped in a [`Database`] marked as
//! lent, which neither closes nor frees the handle, and handed over as `&Database`, so the
//! closure cannot keep it.

use std::fmt;
use std::os::raw::c_void;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use crate::completion::{enter_callback, guard_panic};
use crate::db::Database;
use crate::schema::string_from;
use crate::sys;
use crate::value::Value;

/// What a session does when the server can no longer sync with the device's file
/// (`ferry_client_reset_mode_t`): the server sends a client-reset error after sync was
/// terminated and enabled again, or when the device was offline longer than the server's
/// client maximum offline days.
///
/// The automatic modes turn the file into the server's state while the host keeps its
/// [`Database`] handles open (their notifications report what changed) and then report what
/// happened to the App's error handler as a non-fatal [`SyncError`](crate::SyncError) with
/// [`SyncAction::ClientReset`](crate::SyncAction::ClientReset) (or
/// [`ClientResetNoRecovery`](crate::SyncAction::ClientResetNoRecovery) when the server
/// disabled recovery) and a [`client_reset_report`](crate::SyncError::client_reset_report).
///
/// ```no_run
/// # use std::time::Duration;
/// # use ferry::{App, ClientResetMode, ClientResetOutcome, Schema, SyncOptions, User};
/// # fn f(app: &App, user: &User, schema: &Schema) -> ferry::Result<()> {
/// app.set_sync_error_handler(|_, error| {
///     if let Some(report) = &error.client_reset_report {
///         for entry in &report.entries {
///             if entry.outcome == ClientResetOutcome::Discarded {
///                 eprintln!("lost a change to {:?}: {}", entry.primary_key, entry.reason);
///             }
///         }
///     } else if let Some(token) = &error.client_reset_token {
///         // A reset handed to the host: drop the session and database, then
///         // app.handle_client_reset(token) (off the loop thread), or reopen later.
///         eprintln!("reset pending for {token}; backup at {:?}", error.client_reset_backup_path);
///     }
/// })?;
/// let options = SyncOptions::new("/var/lib/my-app/items.ferry", schema)
///     .client_reset_mode(ClientResetMode::RecoverUnsyncedChanges)
///     .before_reset(|before| {
///         // Keep the database as it was; `before` is lent for this call only.
///         let _ = before.write_copy("/var/lib/my-app/items.before-reset.ferry");
///     })
///     .after_reset(|_before, after, report| {
///         eprintln!("{} objects touched; {:?} items now", report.entries.len(),
///             after.query("Item", "TRUEPREDICATE", &[]).map(|r| r.len()));
///     });
/// let (session, db) = app.open_synced_with(user, &options, Duration::from_secs(30))?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ClientResetMode {
    /// The default: the server's state, then the device's unsynced changes replayed on it.
    /// When the server disables recovery (or recovery fails), the reset is handed to the host
    /// as in [`Manual`](ClientResetMode::Manual).
    #[default]
    RecoverUnsyncedChanges,
    /// Recovers; discards when the server disables recovery or recovery fails (and at the
    /// next attempt after a failed recovery).
    RecoverOrDiscardUnsyncedChanges,
    /// The server's state; the unsynced changes are dropped (and listed in the report).
    DiscardUnsyncedChanges,
    /// Nothing changes: the session stops, and the error handler gets a fatal error with a
    /// [`client_reset_backup_path`](crate::SyncError::client_reset_backup_path) and a
    /// [`client_reset_token`](crate::SyncError::client_reset_token) for
    /// [`App::handle_client_reset`](crate::App::handle_client_reset).
    Manual,
}

impl ClientResetMode {
    pub(crate) fn as_raw(self) -> i32 {
        match self {
            ClientResetMode::RecoverUnsyncedChanges => {
                sys::FERRY_CLIENT_RESET_RECOVER_UNSYNCED_CHANGES
            }
            ClientResetMode::RecoverOrDiscardUnsyncedChanges => {
                sys::FERRY_CLIENT_RESET_RECOVER_OR_DISCARD_UNSYNCED_CHANGES
            }
            ClientResetMode::DiscardUnsyncedChanges => {
                sys::FERRY_CLIENT_RESET_DISCARD_UNSYNCED_CHANGES
            }
            ClientResetMode::Manual => sys::FERRY_CLIENT_RESET_MANUAL,
        }
    }
}

/// What a reset did with one object's unsynced changes (`ferry_client_reset_outcome_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientResetOutcome {
    /// The device's change is in the database and will sync.
    Recovered,
    /// The device's change is gone; the entry's reason says why.
    Discarded,
    /// An outcome this binding does not know.
    Unknown(i32),
}

impl ClientResetOutcome {
    fn from_raw(raw: i32) -> ClientResetOutcome {
        match raw {
            sys::FERRY_CLIENT_RESET_RECOVERED => ClientResetOutcome::Recovered,
            sys::FERRY_CLIENT_RESET_DISCARDED => ClientResetOutcome::Discarded,
            other => ClientResetOutcome::Unknown(other),
        }
    }
}

/// One object touched by the device's unsynced changes (`ferry_client_reset_entry_t`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientResetEntry {
    /// The object's class, e.g. `"Item"`.
    pub object_type: String,
    /// The object's primary key.
    pub primary_key: Value,
    /// Whether the device's change survived.
    pub outcome: ClientResetOutcome,
    /// Why, e.g. `created on this device and not yet synced`, `the device's updates applied
    /// over the server's: itemName`, `the client reset mode is discardUnsyncedChanges`.
    pub reason: String,
}

/// What a finished automatic reset kept and dropped (a copy of
/// `ferry_client_reset_report_t`): one entry per object the unsynced changes touched.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientResetReport {
    /// `true`: the changes were replayed (the entries say per object what survived);
    /// `false`: they were discarded.
    pub recovered: bool,
    /// How many local transactions the server had not acknowledged.
    pub unsynced_changesets: usize,
    /// One entry per touched object.
    pub entries: Vec<ClientResetEntry>,
}

impl ClientResetReport {
    /// The entry of the object with this primary key, if the unsynced changes touched it.
    pub fn entry(&self, primary_key: impl Into<Value>) -> Option<&ClientResetEntry> {
        let key = primary_key.into();
        self.entries.iter().find(|e| e.primary_key == key)
    }

    /// Copies a report lent to a callback.
    ///
    /// # Safety
    /// `raw` and everything it points to must be valid (as during the callback's call).
    pub(crate) unsafe fn from_raw(raw: &sys::ferry_client_reset_report_t) -> ClientResetReport {
        let entries: &[sys::ferry_client_reset_entry_t] =
            if raw.entries.is_null() || raw.entries_count == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(raw.entries, raw.entries_count)
            };
        ClientResetReport {
            recovered: raw.recovered,
            unsynced_changesets: raw.unsynced_changesets,
            entries: entries
                .iter()
                .map(|e| ClientResetEntry {
                    object_type: string_from(e.object_type).unwrap_or_default(),
                    primary_key: Value::from_raw(&e.primary_key).unwrap_or_else(|err| {
                        eprintln!(
                            "ferry: could not read a client reset entry's primary key: {err}"
                        );
                        Value::Null
                    }),
                    outcome: ClientResetOutcome::from_raw(e.outcome),
                    reason: string_from(e.reason).unwrap_or_default(),
                })
                .collect(),
        }
    }
}

// --- The before and after closures -------------------------------------------------------------

pub(crate) type BeforeReset = Mutex<Box<dyn FnMut(&Database) + Send>>;
pub(crate) type AfterReset = Mutex<Box<dyn FnMut(&Database, &Database, &ClientResetReport) + Send>>;

/// The reset closures of a set of options: what the raw options' userdata point to.
#[derive(Clone, Default)]
pub(crate) struct ResetCallbacks {
    pub(crate) before: Option<Arc<BeforeReset>>,
    pub(crate) after: Option<Arc<AfterReset>>,
    /// The pre-flight check's closure (SPEC F-PRECHECK), kept alive the same way.
    pub(crate) precheck: Option<Arc<Box<crate::precheck::PrecheckFn>>>,
}

impl fmt::Debug for ResetCallbacks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResetCallbacks")
            .field("before", &self.before.as_ref().map(|_| "FnMut(&Database)"))
            .field(
                "after",
                &self.after.as_ref().map(|_| "FnMut(&Database, &Database, &ClientResetReport)"),
            )
            .field("precheck", &self.precheck.as_ref().map(|_| "Fn(&[CompensatingWrite], bool)"))
            .finish()
    }
}

impl ResetCallbacks {
    /// Points the raw options at these closures. The caller keeps a clone of `self` alive
    /// until the session opened with `raw` is freed.
    pub(crate) fn fill(&self, raw: &mut sys::ferry_sync_options_t) {
        if let Some(before) = &self.before {
            raw.before_reset = Some(before_trampoline);
            raw.before_reset_userdata = Arc::as_ptr(before) as *mut c_void;
        }
        if let Some(after) = &self.after {
            raw.after_reset = Some(after_trampoline);
            raw.after_reset_userdata = Arc::as_ptr(after) as *mut c_void;
        }
        if let Some(precheck) = &self.precheck {
            crate::precheck::fill(precheck, raw);
        }
    }
}

unsafe extern "C" fn before_trampoline(userdata: *mut c_void, before: *mut sys::ferry_db_t) {
    let _scope = enter_callback(true);
    let Some(before) = NonNull::new(before) else { return };
    if userdata.is_null() {
        return;
    }
    guard_panic("the before-reset callback", || {
        // SAFETY: userdata is the content of an `Arc<BeforeReset>` that the session (or its
        // open's completion) keeps alive until the session is freed.
        let callback = &*(userdata as *const BeforeReset);
        // SAFETY: libferry lends the handle for this call; the lent Database never closes
        // or frees it, and the closure only gets a reference that cannot outlive the call.
        let before = Database::lent(before);
        let mut callback = callback.lock().unwrap_or_else(PoisonError::into_inner);
        (*callback)(&before);
    });
}

unsafe extern "C" fn after_trampoline(
    userdata: *mut c_void,
    before: *mut sys::ferry_db_t,
    after: *mut sys::ferry_db_t,
    report: *const sys::ferry_client_reset_report_t,
) {
    let _scope = enter_callback(true);
    let (Some(before), Some(after)) = (NonNull::new(before), NonNull::new(after)) else { return };
    if userdata.is_null() || report.is_null() {
        return;
    }
    guard_panic("the after-reset callback", || {
        // SAFETY: as in `before_trampoline`; the report is valid for the call and copied first.
        let callback = &*(userdata as *const AfterReset);
        let report = ClientResetReport::from_raw(&*report);
        let before = Database::lent(before);
        let after = Database::lent(after);
        let mut callback = callback.lock().unwrap_or_else(PoisonError::into_inner);
        (*callback)(&before, &after, &report);
    });
}
