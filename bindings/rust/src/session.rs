//! Session state, pause and resume, and progress (`ferry_sync_connection_state`,
//! `ferry_sync_session_state`, `ferry_sync_observe_connection_state`, `ferry_sync_suspend`,
//! `ferry_sync_resume`, `ferry_sync_observe_progress` and their tokens).
//!
//! An observer closure is boxed and handed to libferry as userdata, called through an
//! `extern "C"` trampoline that catches panics, and dropped by the `userdata_free` callback.
//! libferry runs that free function exactly once: on its loop thread after any delivery in
//! progress when the token is freed (so it never overlaps a call of the closure), or before a
//! failing registration returns. A plain `Box` is therefore enough, even when a callback drops
//! its own token: the free is queued behind the running callback.

use std::fmt;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::{Mutex, TryLockError};

use crate::completion::{enter_callback, guard_panic};
use crate::error::{Error, ErrorCode, Result};
use crate::sys;

/// The state of the connection a session syncs over (`ferry_connection_state_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionState {
    /// Not connected (also while the session is paused or ended).
    Disconnected,
    /// Connecting (TCP, TLS, WebSocket, authentication).
    Connecting,
    /// Connected.
    Connected,
    /// A state this binding does not know.
    Unknown(i32),
}

impl ConnectionState {
    pub(crate) fn from_raw(raw: i32) -> ConnectionState {
        match raw {
            sys::FERRY_CONNECTION_DISCONNECTED => ConnectionState::Disconnected,
            sys::FERRY_CONNECTION_CONNECTING => ConnectionState::Connecting,
            sys::FERRY_CONNECTION_CONNECTED => ConnectionState::Connected,
            other => ConnectionState::Unknown(other),
        }
    }
}

/// What a session is doing (`ferry_session_state_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SessionState {
    /// Syncing, or trying to while offline.
    Active,
    /// Suspended by the host ([`SyncSession::suspend`](crate::SyncSession::suspend)).
    Paused,
    /// Ended: freed App, logged-out user, or a fatal error.
    Inactive,
    /// A state this binding does not know.
    Unknown(i32),
}

impl SessionState {
    pub(crate) fn from_raw(raw: i32) -> SessionState {
        match raw {
            sys::FERRY_SESSION_ACTIVE => SessionState::Active,
            sys::FERRY_SESSION_PAUSED => SessionState::Paused,
            sys::FERRY_SESSION_INACTIVE => SessionState::Inactive,
            other => SessionState::Unknown(other),
        }
    }
}

/// Which way the bytes of a progress notifier go (`ferry_progress_direction_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProgressDirection {
    /// Local changesets to the server (acknowledged out of committed).
    Upload,
    /// The server's changesets to this device (received out of announced).
    Download,
}

impl ProgressDirection {
    fn as_raw(self) -> i32 {
        match self {
            ProgressDirection::Upload => sys::FERRY_PROGRESS_UPLOAD,
            ProgressDirection::Download => sys::FERRY_PROGRESS_DOWNLOAD,
        }
    }
}

/// How long a progress notifier reports (`ferry_progress_mode_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProgressMode {
    /// Every unit of work, until the token is dropped.
    ReportIndefinitely,
    /// The work outstanding at registration: the last report is exactly 1.0, then the
    /// notifier stops by itself (drop its token all the same).
    ForCurrentWork,
}

impl ProgressMode {
    fn as_raw(self) -> i32 {
        match self {
            ProgressMode::ReportIndefinitely => sys::FERRY_PROGRESS_REPORT_INDEFINITELY,
            ProgressMode::ForCurrentWork => sys::FERRY_PROGRESS_FOR_CURRENT_WORK,
        }
    }
}

/// One progress report (a copy of `ferry_progress_t`). Within a unit of work
/// `progress_estimate` never goes down, stays in `[0.0, 1.0]` and is exactly 1.0 when the work
/// is done. Bytes are changeset bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// From 0.0 to 1.0.
    pub progress_estimate: f64,
    /// Bytes transferred (uploads: acknowledged by the server; downloads: received).
    pub transferred_bytes: u64,
    /// Bytes to transfer (uploads: committed; downloads: announced by the server).
    pub transferable_bytes: u64,
}

impl Progress {
    /// Whether the work is done (`progress_estimate` is 1.0).
    pub fn is_complete(&self) -> bool {
        self.progress_estimate >= 1.0
    }
}

// --- Observers ---------------------------------------------------------------------------------

/// A boxed observer closure. Calls come from the loop thread only, one at a time; the mutex
/// gives `FnMut` its exclusive access and turns a re-entrant call into a skipped one.
struct Observer<F>(Mutex<F>);

impl<F> Observer<F> {
    fn call(&self, what: &str, f: impl FnOnce(&mut F)) {
        let mut guard = match self.0.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                eprintln!("ferry: a {what} re-entered itself; the nested call was skipped");
                return;
            }
        };
        guard_panic(what, || f(&mut guard));
    }
}

unsafe extern "C" fn connection_state_trampoline<
    F: FnMut(ConnectionState, ConnectionState) + Send,
>(
    userdata: *mut c_void,
    old: i32,
    new: i32,
) {
    let _scope = enter_callback(true);
    if userdata.is_null() {
        return;
    }
    // SAFETY: userdata is the `Box<Observer<F>>` of `register`, freed only by `free_observer`,
    // which libferry never runs during a call.
    let observer = &*(userdata as *const Observer<F>);
    observer.call("connection state callback", |f| {
        f(ConnectionState::from_raw(old), ConnectionState::from_raw(new))
    });
}

unsafe extern "C" fn progress_trampoline<F: FnMut(Progress) + Send>(
    userdata: *mut c_void,
    progress: *const sys::ferry_progress_t,
) {
    let _scope = enter_callback(true);
    if userdata.is_null() || progress.is_null() {
        return;
    }
    // SAFETY: the progress is lent for the call; copied right away.
    let raw = *progress;
    let progress = Progress {
        progress_estimate: raw.progress_estimate,
        transferred_bytes: raw.transferred_bytes,
        transferable_bytes: raw.transferable_bytes,
    };
    // SAFETY: as in `connection_state_trampoline`.
    let observer = &*(userdata as *const Observer<F>);
    observer.call("progress callback", |f| f(progress));
}

unsafe extern "C" fn free_observer<F>(userdata: *mut c_void) {
    if userdata.is_null() {
        return;
    }
    // Dropping the closure runs its captures' destructors, which may panic.
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: from `Box::into_raw` in `register`; libferry runs the free function once.
        drop(Box::from_raw(userdata as *mut Observer<F>));
    }));
    if outcome.is_err() {
        eprintln!("ferry: dropping a session observer panicked");
    }
}

/// Registers `callback` through `call(out, userdata, userdata_free)`.
fn register<F, T>(
    callback: F,
    call: impl FnOnce(*mut *mut T, *mut c_void, sys::ferry_free_fn) -> c_int,
) -> Result<NonNull<T>> {
    let userdata = Box::into_raw(Box::new(Observer(Mutex::new(callback)))) as *mut c_void;
    let mut out = ptr::null_mut();
    // From here on libferry owns `userdata`: on failure it has already run `free_observer`.
    Error::check(call(&mut out, userdata, Some(free_observer::<F>)))?;
    NonNull::new(out).ok_or_else(|| {
        Error::new(ErrorCode::Internal, "a registration succeeded but returned a NULL token")
    })
}

/// Observes a session's connection state (see `SyncSession::observe_connection_state`).
pub(crate) fn observe_connection_state<F>(
    session: *mut sys::ferry_sync_session_t,
    callback: F,
) -> Result<ConnectionStateToken>
where
    F: FnMut(ConnectionState, ConnectionState) + Send + 'static,
{
    let raw = register(callback, |out, userdata, free| {
        // SAFETY: valid out-parameter; libferry validates the session and owns userdata.
        unsafe {
            sys::ferry_sync_observe_connection_state(
                out,
                session,
                Some(connection_state_trampoline::<F>),
                userdata,
                free,
            )
        }
    })?;
    Ok(ConnectionStateToken { raw })
}

/// Registers a progress notifier (see `SyncSession::observe_progress`).
pub(crate) fn observe_progress<F>(
    session: *mut sys::ferry_sync_session_t,
    direction: ProgressDirection,
    mode: ProgressMode,
    callback: F,
) -> Result<ProgressToken>
where
    F: FnMut(Progress) + Send + 'static,
{
    let raw = register(callback, |out, userdata, free| {
        // SAFETY: valid out-parameter; libferry validates the session and owns userdata.
        unsafe {
            sys::ferry_sync_observe_progress(
                out,
                session,
                direction.as_raw(),
                mode.as_raw(),
                Some(progress_trampoline::<F>),
                userdata,
                free,
            )
        }
    })?;
    Ok(ProgressToken { raw })
}

/// A connection state observer's registration. Dropping it unregisters: no callback starts
/// after the drop returns (one already running on the loop thread finishes), and the closure
/// is dropped on the loop thread right after. Dropping it inside its own callback is allowed.
/// It may outlive its session.
#[must_use = "dropping the token unregisters the callback"]
pub struct ConnectionStateToken {
    raw: NonNull<sys::ferry_connection_state_token_t>,
}

// SAFETY: tokens may be freed from any thread.
unsafe impl Send for ConnectionStateToken {}
unsafe impl Sync for ConnectionStateToken {}

impl fmt::Debug for ConnectionStateToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ConnectionStateToken").field(&self.raw).finish()
    }
}

impl Drop for ConnectionStateToken {
    fn drop(&mut self) {
        // SAFETY: we own the token; any thread.
        unsafe { sys::ferry_connection_state_token_free(self.raw.as_ptr()) }
    }
}

/// A progress notifier's registration; unregisters on drop like [`ConnectionStateToken`]. A
/// [`ProgressMode::ForCurrentWork`] notifier stops by itself after reporting 1.0.
#[must_use = "dropping the token unregisters the callback"]
pub struct ProgressToken {
    raw: NonNull<sys::ferry_progress_token_t>,
}

// SAFETY: tokens may be freed from any thread.
unsafe impl Send for ProgressToken {}
unsafe impl Sync for ProgressToken {}

impl fmt::Debug for ProgressToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ProgressToken").field(&self.raw).finish()
    }
}

impl Drop for ProgressToken {
    fn drop(&mut self) {
        // SAFETY: we own the token; any thread.
        unsafe { sys::ferry_progress_token_free(self.raw.as_ptr()) }
    }
}
