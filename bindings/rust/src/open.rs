//! How a synced database is opened (`ferry_sync_options_t` version 4): download before open,
//! the open timeout, in-memory databases, initial subscriptions, the client reset mode
//! with its before and after closures, and the pre-flight check of local writes.

use std::any::Any;
use std::fmt;
use std::os::raw::{c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, ThreadId};
use std::time::Duration;

use crate::completion::enter_callback;
use crate::db::{c_string, Database};
use crate::error::{Error, ErrorCode, Result};
use crate::precheck::PrecheckMode;
use crate::reset::{ClientResetMode, ClientResetReport, ResetCallbacks};
use crate::schema::Schema;
use crate::sync::CompensatingWrite;
use crate::sync::MutableSubscriptionSet;
use crate::sys;

/// Whether opening a synced database waits for the server (`ferry_download_before_open_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DownloadBeforeOpen {
    /// Open at once, offline too; sync in the background (the default).
    #[default]
    Never,
    /// Download everything the subscriptions match first, at every open.
    Always,
    /// Download first at the file's first successful open only.
    Once,
}

impl DownloadBeforeOpen {
    fn as_raw(self) -> i32 {
        match self {
            DownloadBeforeOpen::Never => sys::FERRY_DOWNLOAD_BEFORE_OPEN_NEVER,
            DownloadBeforeOpen::Always => sys::FERRY_DOWNLOAD_BEFORE_OPEN_ALWAYS,
            DownloadBeforeOpen::Once => sys::FERRY_DOWNLOAD_BEFORE_OPEN_ONCE,
        }
    }
}

type InitialSubscriptions<'a> = dyn Fn(&mut MutableSubscriptionSet) + 'a;

/// How to open a synced database (`ferry_sync_options_t`), for
/// [`App::open_synced_with`](crate::App::open_synced_with) and
/// [`App::open_async`](crate::App::open_async).
///
/// ```no_run
/// # use std::time::Duration;
/// # use ferry::{App, DownloadBeforeOpen, Schema, SyncOptions, User};
/// # fn f(app: &App, user: &User, schema: &Schema) -> ferry::Result<()> {
/// let options = SyncOptions::new("/var/lib/my-app/items.ferry", schema)
///     .download_before_open(DownloadBeforeOpen::Always)
///     .open_timeout(Duration::from_secs(10))
///     .initial_subscriptions(|set| {
///         set.add("items", "Item", "complexity <= 4");
///     });
/// let (session, db) = app.open_synced_with(user, &options, Duration::from_secs(30))?;
/// # Ok(()) }
/// ```
///
/// The client reset closures ([`before_reset`](SyncOptions::before_reset),
/// [`after_reset`](SyncOptions::after_reset)) are shared by every session opened with these
/// options, and live until the options and the last of those sessions are dropped.
pub struct SyncOptions<'a> {
    path: PathBuf,
    schema: &'a Schema,
    download_before_open: DownloadBeforeOpen,
    open_timeout: Option<Duration>,
    in_memory: bool,
    initial_subscriptions: Option<Box<InitialSubscriptions<'a>>>,
    rerun_initial_subscriptions: bool,
    client_reset_mode: ClientResetMode,
    reset_callbacks: ResetCallbacks,
    precheck_mode: PrecheckMode,
    encryption_key: Option<&'a [u8; 64]>,
}

impl fmt::Debug for SyncOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncOptions")
            .field("path", &self.path)
            .field("download_before_open", &self.download_before_open)
            .field("open_timeout", &self.open_timeout)
            .field("in_memory", &self.in_memory)
            .field("initial_subscriptions", &self.initial_subscriptions.as_ref().map(|_| "Fn"))
            .field("rerun_initial_subscriptions", &self.rerun_initial_subscriptions)
            .field("client_reset_mode", &self.client_reset_mode)
            .field("reset_callbacks", &self.reset_callbacks)
            .field("precheck_mode", &self.precheck_mode)
            .field("encryption_key", &self.encryption_key.map(|_| "<64-byte encryption key>"))
            .finish()
    }
}

impl<'a> SyncOptions<'a> {
    /// A database file at `path` (created if missing) with `schema`; libferry's defaults for
    /// the rest: download before open [`Never`](DownloadBeforeOpen::Never), an open timeout
    /// of 30 s, no initial subscriptions, client reset mode
    /// [`RecoverUnsyncedChanges`](ClientResetMode::RecoverUnsyncedChanges) without closures.
    pub fn new(path: impl AsRef<Path>, schema: &'a Schema) -> SyncOptions<'a> {
        SyncOptions {
            path: path.as_ref().to_path_buf(),
            schema,
            download_before_open: DownloadBeforeOpen::Never,
            open_timeout: None,
            in_memory: false,
            initial_subscriptions: None,
            rerun_initial_subscriptions: false,
            client_reset_mode: ClientResetMode::RecoverUnsyncedChanges,
            reset_callbacks: ResetCallbacks::default(),
            precheck_mode: PrecheckMode::Off,
            encryption_key: None,
        }
    }

    /// An in-memory synced database named `identifier`: nothing is written to disk, and its
    /// data is dropped when the session and every database handle are gone.
    pub fn in_memory(identifier: impl Into<String>, schema: &'a Schema) -> SyncOptions<'a> {
        let mut options = SyncOptions::new(PathBuf::from(identifier.into()), schema);
        options.in_memory = true;
        options
    }

    /// Encrypts the file with this 64-byte key, as [`Options::encryption_key`](crate::Options::encryption_key)
    /// does; a client reset's snapshots and backups are encrypted with it too. Not with
    /// [`in_memory`](SyncOptions::in_memory).
    pub fn encryption_key(mut self, key: &'a [u8; 64]) -> SyncOptions<'a> {
        self.encryption_key = Some(key);
        self
    }

    /// Whether the open waits for the server first.
    pub fn download_before_open(mut self, mode: DownloadBeforeOpen) -> SyncOptions<'a> {
        self.download_before_open = mode;
        self
    }

    /// How long a download before open may take (default 30 s); then the open fails with
    /// [`ErrorCode::Timeout`]. Rounded up to whole milliseconds.
    pub fn open_timeout(mut self, timeout: Duration) -> SyncOptions<'a> {
        self.open_timeout = Some(timeout);
        self
    }

    /// Fills a new database's subscription set: called on the opening thread before the open
    /// call returns, when the set was never written (or at every open with
    /// [`rerun_initial_subscriptions`](SyncOptions::rerun_initial_subscriptions)). A failed
    /// edit or a panic in it fails the open with that error.
    pub fn initial_subscriptions(
        mut self,
        fill: impl Fn(&mut MutableSubscriptionSet) + 'a,
    ) -> SyncOptions<'a> {
        self.initial_subscriptions = Some(Box::new(fill));
        self
    }

    /// Runs the initial subscriptions at every open, not only when the set was never written.
    pub fn rerun_initial_subscriptions(mut self, rerun: bool) -> SyncOptions<'a> {
        self.rerun_initial_subscriptions = rerun;
        self
    }

    /// What the session does when the server can no longer sync with the file (default
    /// [`ClientResetMode::RecoverUnsyncedChanges`]).
    pub fn client_reset_mode(mut self, mode: ClientResetMode) -> SyncOptions<'a> {
        self.client_reset_mode = mode;
        self
    }

    /// Called before an automatic client reset changes the file, on Ferry's loop thread, with
    /// a read-only database on a snapshot of the file as it was (unsynced changes included).
    /// The database is lent for the call: read it, or keep it with
    /// [`Database::write_copy`]; it cannot be closed, and libferry closes it and deletes the
    /// snapshot after the [`after_reset`](SyncOptions::after_reset) closure. Not called in
    /// [`ClientResetMode::Manual`]. It must not wait for sync (blocking waits fail with
    /// [`ErrorCode::InvalidArgument`] there); a panic in it is caught and reported on stderr.
    pub fn before_reset<F>(mut self, callback: F) -> SyncOptions<'a>
    where
        F: FnMut(&Database) + Send + 'static,
    {
        self.reset_callbacks.before = Some(Arc::new(Mutex::new(Box::new(callback))));
        self
    }

    /// Called after an automatic client reset, on Ferry's loop thread, with the snapshot of
    /// the database before the reset (as in [`before_reset`](SyncOptions::before_reset)), the
    /// reset database (a write transaction on it is allowed) and the report of what was
    /// recovered or discarded. Both databases are lent for the call. The App's error handler
    /// then gets the same report. Not called in [`ClientResetMode::Manual`].
    pub fn after_reset<F>(mut self, callback: F) -> SyncOptions<'a>
    where
        F: FnMut(&Database, &Database, &ClientResetReport) + Send + 'static,
    {
        self.reset_callbacks.after = Some(Arc::new(Mutex::new(Box::new(callback))));
        self
    }

    /// The pre-flight check of local writes (default [`PrecheckMode::Off`]; SPEC
    /// F-PRECHECK): [`Warn`](PrecheckMode::Warn) commits and reports,
    /// [`Strict`](PrecheckMode::Strict) fails a commit the server would reject with
    /// [`ErrorCode::WriteRejected`] and rolls it back.
    pub fn precheck_mode(mut self, mode: PrecheckMode) -> SyncOptions<'a> {
        self.precheck_mode = mode;
        self
    }

    /// Called for every commit that fails the pre-flight check, on the committing thread
    /// before the commit returns, with the would-be compensating writes (the server's exact
    /// reasons) and whether the commit went ahead (warn) or was rolled back (strict). Shared
    /// by every session opened with these options; a panic in it is caught and reported on
    /// stderr.
    pub fn on_precheck<F>(mut self, callback: F) -> SyncOptions<'a>
    where
        F: Fn(&[CompensatingWrite], bool) + Send + Sync + 'static,
    {
        let boxed: Box<crate::precheck::PrecheckFn> = Box::new(callback);
        self.reset_callbacks.precheck = Some(Arc::new(boxed));
        self
    }

    /// The reset closures, which a session opened with these options must keep alive.
    pub(crate) fn reset_callbacks(&self) -> ResetCallbacks {
        self.reset_callbacks.clone()
    }

    pub(crate) fn waits_for_server(&self) -> bool {
        self.download_before_open != DownloadBeforeOpen::Never
    }

    /// Calls `call` with the raw options. Errors of the initial subscriptions closure go to
    /// `error` (set before libferry fails the open, and so before its completion runs).
    pub(crate) fn with_raw<R>(
        &self,
        error: &Arc<Mutex<Option<Error>>>,
        call: impl FnOnce(&sys::ferry_sync_options_t) -> R,
    ) -> Result<R> {
        // SAFETY: integers, bools, NULL pointers and None are valid zeroes; the init fills in
        // the defaults.
        let mut raw: sys::ferry_sync_options_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid out-parameter.
        Error::check(unsafe {
            sys::ferry_sync_options_init(&mut raw, sys::FERRY_SYNC_OPTIONS_VERSION)
        })?;
        let path = c_string(self.path.as_os_str().as_bytes(), "path")?;
        raw.path = path.as_ptr();
        raw.schema = self.schema.as_ptr();
        raw.download_before_open = self.download_before_open.as_raw();
        if let Some(timeout) = self.open_timeout {
            raw.open_timeout_ms = millis(timeout);
        }
        raw.in_memory = self.in_memory;
        raw.rerun_initial_subscriptions = self.rerun_initial_subscriptions;
        raw.client_reset_mode = self.client_reset_mode.as_raw();
        raw.precheck_mode = self.precheck_mode.as_raw();
        raw.encryption_key = self.encryption_key.map_or(std::ptr::null(), |k| k.as_ptr());
        // The caller keeps a clone of the closures (`reset_callbacks`) with the session.
        self.reset_callbacks.fill(&mut raw);
        let state = self.initial_subscriptions.as_deref().map(|fill| InitialState {
            fill,
            thread: thread::current().id(),
            error: Arc::clone(error),
        });
        if let Some(state) = &state {
            raw.initial_subscriptions = Some(initial_subscriptions_trampoline);
            raw.initial_subscriptions_userdata = state as *const InitialState as *mut c_void;
        }
        // libferry calls the initial subscriptions before `call` returns; `state`, `path` and
        // the schema outlive it.
        let out = call(&raw);
        drop(state);
        Ok(out)
    }
}

/// Milliseconds, rounded up, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 && !d.is_zero() {
        1
    } else {
        ms
    }
}

/// What `initial_subscriptions_userdata` points to, on the opening thread's stack.
struct InitialState<'s> {
    fill: &'s InitialSubscriptions<'s>,
    thread: ThreadId,
    error: Arc<Mutex<Option<Error>>>,
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

unsafe extern "C" fn initial_subscriptions_trampoline(
    userdata: *mut c_void,
    set: *mut sys::ferry_subscription_set_t,
) -> c_int {
    let _scope = enter_callback(false);
    let Some(set) = NonNull::new(set) else { return sys::FERRY_ERR_INVALID_ARGUMENT };
    if userdata.is_null() {
        return sys::FERRY_ERR_INVALID_ARGUMENT;
    }
    // SAFETY: userdata points to the `InitialState` of `with_raw`, alive during the open call.
    let state = &*(userdata as *const InitialState);
    if thread::current().id() != state.thread {
        // ferry.h promises the opening thread; the closure need not be Send, so refuse.
        eprintln!("ferry: the initial subscriptions callback ran on another thread; refused");
        return sys::FERRY_ERR_INTERNAL;
    }
    let mut subs = MutableSubscriptionSet::lent(set);
    let failure = match catch_unwind(AssertUnwindSafe(|| (state.fill)(&mut subs))) {
        Ok(()) => subs.take_error(),
        Err(payload) => Some(Error::new(
            ErrorCode::InvalidArgument,
            format!("the initial subscriptions closure panicked: {}", panic_message(&*payload)),
        )),
    };
    match failure {
        None => sys::FERRY_OK,
        Some(e) => {
            *state.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
            sys::FERRY_ERR_INVALID_ARGUMENT
        }
    }
}
