//! Sync sessions, flexible-sync subscriptions and sync errors (`ferry_sync_*`,
//! `ferry_subscription_set_*`, `ferry_sync_error_t`).

use std::ffi::{CStr, OsStr};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::c_void;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::app::AppInner;
use crate::completion::{block_on, free_off_loop, start_status, SendPtr};
use crate::db::c_string;
use crate::error::{Error, ErrorCode, Result};
use crate::receipt::{start_receipt, Receipt, ReceiptState};
use crate::reset::{ClientResetReport, ResetCallbacks};
use crate::reverted::RevertedObject;
use crate::schema::string_from;
use crate::session::{
    self, ConnectionState, ConnectionStateToken, Progress, ProgressDirection, ProgressMode,
    ProgressToken, SessionState,
};
use crate::sys;
use crate::value::Value;

// --- Errors ------------------------------------------------------------------------------------

/// What the client should do about a [`SyncError`] (`ferry_sync_action_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncAction {
    /// Nothing: informational (compensating writes).
    Warning,
    /// Retry later.
    Transient,
    /// A bug in the application (for example a rejected subscription).
    ApplicationBug,
    /// The client broke the protocol.
    ProtocolViolation,
    /// Delete the database.
    DeleteDatabase,
    /// A client reset.
    ClientReset,
    /// A client reset without recovery.
    ClientResetNoRecovery,
    /// Revert to partition-based sync.
    RevertToPbs,
    /// Refresh the user's token.
    RefreshUser,
    /// Refresh the server location.
    RefreshLocation,
    /// Log the user out.
    LogOutUser,
    /// An action this binding does not know.
    Unknown(i32),
}

impl SyncAction {
    fn from_raw(raw: i32) -> SyncAction {
        use SyncAction::*;
        match raw {
            sys::FERRY_SYNC_ACTION_WARNING => Warning,
            sys::FERRY_SYNC_ACTION_TRANSIENT => Transient,
            sys::FERRY_SYNC_ACTION_APPLICATION_BUG => ApplicationBug,
            sys::FERRY_SYNC_ACTION_PROTOCOL_VIOLATION => ProtocolViolation,
            sys::FERRY_SYNC_ACTION_DELETE_DATABASE => DeleteDatabase,
            sys::FERRY_SYNC_ACTION_CLIENT_RESET => ClientReset,
            sys::FERRY_SYNC_ACTION_CLIENT_RESET_NO_RECOVERY => ClientResetNoRecovery,
            sys::FERRY_SYNC_ACTION_REVERT_TO_PBS => RevertToPbs,
            sys::FERRY_SYNC_ACTION_REFRESH_USER => RefreshUser,
            sys::FERRY_SYNC_ACTION_REFRESH_LOCATION => RefreshLocation,
            sys::FERRY_SYNC_ACTION_LOG_OUT_USER => LogOutUser,
            other => Unknown(other),
        }
    }
}

/// One object of a write the server rejected and reverted.
#[derive(Debug, Clone, PartialEq)]
pub struct CompensatingWrite {
    /// The object's class, e.g. `"Item"`.
    pub object_type: String,
    /// The object's primary key.
    pub primary_key: Value,
    /// Why, e.g. `write to "<pk>" in table "Item" not allowed; object is outside of the
    /// current query view`.
    pub reason: String,
}

/// A sync error reported to the App's sync error handler (a copy of `ferry_sync_error_t`).
///
/// Client resets reach the handler in two shapes:
/// - a finished automatic reset: not fatal, [`SyncAction::ClientReset`] (or
///   [`SyncAction::ClientResetNoRecovery`]), with a
///   [`client_reset_report`](SyncError::client_reset_report) and the server's code (208);
/// - a reset handed to the host ([`ClientResetMode::Manual`](crate::ClientResetMode::Manual),
///   or [`RecoverUnsyncedChanges`](crate::ClientResetMode::RecoverUnsyncedChanges) when the
///   server disables recovery): fatal, with a
///   [`client_reset_backup_path`](SyncError::client_reset_backup_path) and a
///   [`client_reset_token`](SyncError::client_reset_token) for
///   [`App::handle_client_reset`](crate::App::handle_client_reset).
#[derive(Debug, Clone, PartialEq)]
pub struct SyncError {
    /// The server's error code: [`SyncError::COMPENSATING_WRITE`] (231),
    /// [`SyncError::SUBSCRIPTION_REJECTED`] (226), ...
    pub code: i32,
    /// The message.
    pub message: String,
    /// Whether the session stopped syncing.
    pub is_fatal: bool,
    /// What the client should do.
    pub action: SyncAction,
    /// For compensating writes: the reverted objects.
    pub compensating_writes: Vec<CompensatingWrite>,
    /// For compensating writes (SPEC F-NOLOSS): what each one's revert took from the device,
    /// by the index of `compensating_writes` (`None` where it took nothing; entries naming the
    /// same object share one record). See [`SyncError::reverted`].
    pub reverted_objects: Vec<Option<Arc<RevertedObject>>>,
    /// For a finished automatic client reset: what was recovered and discarded.
    pub client_reset_report: Option<ClientResetReport>,
    /// For a client reset handed to the host: where
    /// [`App::handle_client_reset`](crate::App::handle_client_reset) (or the file's next open)
    /// moves the database file. The file there opens as an ordinary [`Database`](crate::Database)
    /// with the device's data, unsynced changes included. `None` for an in-memory database.
    pub client_reset_backup_path: Option<PathBuf>,
    /// For a client reset handed to the host: the token for
    /// [`App::handle_client_reset`](crate::App::handle_client_reset).
    pub client_reset_token: Option<String>,
}

impl SyncError {
    /// The code of a compensating write: the server rejected and reverted a write (not fatal,
    /// [`SyncAction::Warning`]).
    pub const COMPENSATING_WRITE: i32 = 231;
    /// The code of a rejected subscription set.
    pub const SUBSCRIPTION_REJECTED: i32 = 226;
    /// The code of the server's client-reset error (it no longer knows the device's file),
    /// as a reset handed to the host reports it.
    pub const BAD_CLIENT_FILE: i32 = 208;

    /// What the revert of `compensating_writes[index]` took from the device: the device's
    /// values and the local writes it undid or discarded (`None` when it took nothing).
    pub fn reverted(&self, index: usize) -> Option<&RevertedObject> {
        self.reverted_objects.get(index).and_then(|r| r.as_deref())
    }

    /// Whether this is a compensating write (code 231).
    pub fn is_compensating_write(&self) -> bool {
        self.code == SyncError::COMPENSATING_WRITE
    }

    /// Copies an error lent to the handler.
    ///
    /// # Safety
    /// `raw` and everything it points to must be valid (as during the handler's call).
    pub(crate) unsafe fn from_raw(raw: &sys::ferry_sync_error_t) -> SyncError {
        let writes: &[sys::ferry_compensating_write_t] =
            if raw.compensating_writes.is_null() || raw.compensating_writes_count == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(raw.compensating_writes, raw.compensating_writes_count)
            };
        let mut reverted_objects: Vec<Option<Arc<RevertedObject>>> =
            Vec::with_capacity(writes.len());
        for i in 0..writes.len() {
            let mut lent: *const sys::ferry_reverted_object_t = ptr::null();
            let same = (sys::ferry_sync_error_reverted_object(&mut lent, raw, i) == sys::FERRY_OK
                && !lent.is_null())
            .then(|| {
                (0..i).find(|&j| {
                    let mut earlier: *const sys::ferry_reverted_object_t = ptr::null();
                    sys::ferry_sync_error_reverted_object(&mut earlier, raw, j) == sys::FERRY_OK
                        && earlier == lent
                })
            })
            .flatten();
            reverted_objects.push(match same {
                Some(j) => reverted_objects[j].clone(),
                None => RevertedObject::from_error(raw, i).map(Arc::new),
            });
        }
        SyncError {
            reverted_objects,
            code: raw.code,
            message: string_from(raw.message).unwrap_or_default(),
            is_fatal: raw.is_fatal,
            action: SyncAction::from_raw(raw.action),
            compensating_writes: writes
                .iter()
                .map(|w| CompensatingWrite {
                    object_type: string_from(w.object_type).unwrap_or_default(),
                    primary_key: Value::from_raw(&w.primary_key).unwrap_or_else(|e| {
                        eprintln!("ferry: could not read a compensating write's primary key: {e}");
                        Value::Null
                    }),
                    reason: string_from(w.reason).unwrap_or_default(),
                })
                .collect(),
            client_reset_report: raw
                .client_reset_report
                .as_ref()
                .map(|report| ClientResetReport::from_raw(report)),
            client_reset_backup_path: (!raw.client_reset_backup_path.is_null()).then(|| {
                PathBuf::from(OsStr::from_bytes(
                    CStr::from_ptr(raw.client_reset_backup_path).to_bytes(),
                ))
            }),
            client_reset_token: string_from(raw.client_reset_token),
        }
    }
}

impl fmt::Display for SyncError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sync error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for SyncError {}

// --- Subscriptions -----------------------------------------------------------------------------

/// The state of a subscription set (`ferry_subscription_state_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubscriptionState {
    /// Not yet complete on the server.
    Pending,
    /// The server sent everything it matches.
    Complete,
    /// Rejected: see [`Subscriptions::error`].
    Error,
    /// A later version replaced it.
    Superseded,
    /// A state this binding does not know.
    Unknown(i32),
}

impl SubscriptionState {
    fn from_raw(raw: i32) -> SubscriptionState {
        match raw {
            sys::FERRY_SUBSCRIPTIONS_PENDING => SubscriptionState::Pending,
            sys::FERRY_SUBSCRIPTIONS_COMPLETE => SubscriptionState::Complete,
            sys::FERRY_SUBSCRIPTIONS_ERROR => SubscriptionState::Error,
            sys::FERRY_SUBSCRIPTIONS_SUPERSEDED => SubscriptionState::Superseded,
            other => SubscriptionState::Unknown(other),
        }
    }
}

/// One named query on an object type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subscription {
    /// Its name (unique in the set).
    pub name: String,
    /// The class it queries, e.g. `"Item"`.
    pub object_type: String,
    /// The query, e.g. `"complexity <= 4"`.
    pub query: String,
}

/// A snapshot of a session's subscription set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscriptions {
    /// The set's version (each update makes the next one).
    pub version: u64,
    /// Its state.
    pub state: SubscriptionState,
    /// The server's message for a rejected set ([`SubscriptionState::Error`]).
    pub error: Option<String>,
    /// The subscriptions.
    pub subscriptions: Vec<Subscription>,
}

/// A `ferry_subscription_set_t`: owned (freed on drop), or lent by libferry for a call (the
/// initial subscriptions callback).
struct SetHandle(NonNull<sys::ferry_subscription_set_t>, bool);

impl Drop for SetHandle {
    fn drop(&mut self) {
        if self.1 {
            // SAFETY: we own the handle.
            unsafe { sys::ferry_subscription_set_free(self.0.as_ptr()) }
        }
    }
}

impl SetHandle {
    fn of(session: *mut sys::ferry_sync_session_t) -> Result<SetHandle> {
        let mut out = ptr::null_mut();
        // SAFETY: valid out-parameter; libferry validates the session handle.
        Error::check(unsafe { sys::ferry_sync_subscriptions(&mut out, session) })?;
        NonNull::new(out).map(|set| SetHandle(set, true)).ok_or_else(|| {
            Error::new(ErrorCode::Internal, "ferry_sync_subscriptions succeeded but returned NULL")
        })
    }

    fn ptr(&self) -> *mut sys::ferry_subscription_set_t {
        self.0.as_ptr()
    }

    fn list(&self) -> Result<Vec<Subscription>> {
        let mut count = 0usize;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_subscription_set_count(&mut count, self.ptr()) })?;
        (0..count)
            .map(|index| {
                let (mut name, mut object_type, mut query) =
                    (ptr::null(), ptr::null(), ptr::null());
                // SAFETY: valid handle and out-parameters; the strings are lent until the set
                // is freed or edited, and copied right away.
                unsafe {
                    Error::check(sys::ferry_subscription_set_get(
                        &mut name,
                        &mut object_type,
                        &mut query,
                        self.ptr(),
                        index,
                    ))?;
                    Ok(Subscription {
                        name: string_from(name).unwrap_or_default(),
                        object_type: string_from(object_type).unwrap_or_default(),
                        query: string_from(query).unwrap_or_default(),
                    })
                }
            })
            .collect()
    }

    fn snapshot(&self) -> Result<Subscriptions> {
        let (mut version, mut state, mut error) = (0u64, 0i32, ptr::null());
        // SAFETY: valid handle and out-parameters; the message is copied right away.
        let error = unsafe {
            Error::check(sys::ferry_subscription_set_version(&mut version, self.ptr()))?;
            Error::check(sys::ferry_subscription_set_state(&mut state, self.ptr()))?;
            Error::check(sys::ferry_subscription_set_error(&mut error, self.ptr()))?;
            string_from(error).filter(|e| !e.is_empty())
        };
        Ok(Subscriptions {
            version,
            state: SubscriptionState::from_raw(state),
            error,
            subscriptions: self.list()?,
        })
    }
}

/// An editable copy of a session's subscription set, given to the closure of
/// [`SyncSession::update_subscriptions`].
///
/// The edits do not return errors one by one: the first failed edit (a name with a NUL byte,
/// an empty object type...) is remembered, later edits are skipped, and
/// `update_subscriptions` returns that error without changing anything.
pub struct MutableSubscriptionSet {
    set: SetHandle,
    error: Option<Error>,
}

impl fmt::Debug for MutableSubscriptionSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MutableSubscriptionSet")
            .field("subscriptions", &self.set.list())
            .field("error", &self.error)
            .finish()
    }
}

impl MutableSubscriptionSet {
    /// A set lent by libferry for the duration of a call (not freed on drop).
    pub(crate) fn lent(set: NonNull<sys::ferry_subscription_set_t>) -> MutableSubscriptionSet {
        MutableSubscriptionSet { set: SetHandle(set, false), error: None }
    }

    /// The first failed edit, if any.
    pub(crate) fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    fn edit<T: Default>(
        &mut self,
        f: impl FnOnce(*mut sys::ferry_subscription_set_t) -> Result<T>,
    ) -> T {
        if self.error.is_some() {
            return T::default();
        }
        match f(self.set.ptr()) {
            Ok(v) => v,
            Err(e) => {
                self.error = Some(e);
                T::default()
            }
        }
    }

    /// Adds a named query on an object type, replacing a subscription of the same name.
    pub fn add(&mut self, name: &str, object_type: &str, query: &str) -> &mut Self {
        self.edit(|set| {
            let name = c_string(name.as_bytes(), "subscription name")?;
            let object_type = c_string(object_type.as_bytes(), "object type")?;
            let query = c_string(query.as_bytes(), "query")?;
            // SAFETY: valid handle; the strings outlive the call.
            Error::check(unsafe {
                sys::ferry_subscription_set_add(
                    set,
                    name.as_ptr(),
                    object_type.as_ptr(),
                    query.as_ptr(),
                )
            })
        });
        self
    }

    /// Removes the subscription with this name; returns whether there was one.
    pub fn remove(&mut self, name: &str) -> bool {
        self.edit(|set| {
            let name = c_string(name.as_bytes(), "subscription name")?;
            let mut removed = false;
            // SAFETY: valid handle, out-parameter and string.
            Error::check(unsafe {
                sys::ferry_subscription_set_remove(&mut removed, set, name.as_ptr())
            })?;
            Ok(removed)
        })
    }

    /// Removes every subscription on an object type; returns how many.
    pub fn remove_type(&mut self, object_type: &str) -> usize {
        self.edit(|set| {
            let object_type = c_string(object_type.as_bytes(), "object type")?;
            let mut removed = 0usize;
            // SAFETY: valid handle, out-parameter and string.
            Error::check(unsafe {
                sys::ferry_subscription_set_remove_type(&mut removed, set, object_type.as_ptr())
            })?;
            Ok(removed)
        })
    }

    /// Removes every subscription.
    pub fn remove_all(&mut self) -> &mut Self {
        // SAFETY: a valid handle.
        self.edit(|set| Error::check(unsafe { sys::ferry_subscription_set_remove_all(set) }));
        self
    }

    /// The subscriptions as edited so far.
    pub fn subscriptions(&self) -> Result<Vec<Subscription>> {
        self.set.list()
    }
}

// --- Sessions ----------------------------------------------------------------------------------

/// Identifies a sync session: [`SyncSession::id`] and [`SessionRef::id`] are equal for the
/// same session (compare them in the sync error handler). It is the handle's address: a
/// dropped session's id may be reused by a later one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(usize);

/// A session lent for the duration of a call: what the sync error handler gets. It offers
/// the session's non-blocking operations.
#[derive(Clone, Copy)]
pub struct SessionRef<'a> {
    raw: NonNull<sys::ferry_sync_session_t>,
    _lent: PhantomData<&'a ()>,
}

impl fmt::Debug for SessionRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SessionRef").field(&self.raw).finish()
    }
}

impl<'a> SessionRef<'a> {
    /// A session lent by libferry.
    ///
    /// # Safety
    /// `raw` must stay valid for `'a`.
    pub(crate) unsafe fn lent(raw: NonNull<sys::ferry_sync_session_t>) -> SessionRef<'a> {
        SessionRef { raw, _lent: PhantomData }
    }

    fn ptr(&self) -> *mut sys::ferry_sync_session_t {
        self.raw.as_ptr()
    }

    /// The session's id.
    pub fn id(&self) -> SessionId {
        SessionId(self.raw.as_ptr() as usize)
    }

    /// A snapshot of the session's current subscription set.
    pub fn subscriptions(&self) -> Result<Subscriptions> {
        SetHandle::of(self.ptr())?.snapshot()
    }

    /// The state of the connection the session syncs over
    /// ([`Disconnected`](ConnectionState::Disconnected) while paused or ended).
    pub fn connection_state(&self) -> Result<ConnectionState> {
        let mut out = 0i32;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_sync_connection_state(&mut out, self.ptr()) })?;
        Ok(ConnectionState::from_raw(out))
    }

    /// The session's own state: active, paused or ended.
    pub fn state(&self) -> Result<SessionState> {
        let mut out = 0i32;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_sync_session_state(&mut out, self.ptr()) })?;
        Ok(SessionState::from_raw(out))
    }

    /// Pauses the session both ways (`ferry_sync_suspend`): it leaves its connection (closed
    /// when no other session uses it); local writes are kept and uploaded after
    /// [`resume`](SessionRef::resume); pending waits stay pending. Other sessions keep
    /// syncing. A no-op when already paused or ended. Returns at once: the state changes on
    /// the loop thread right after.
    pub fn suspend(&self) -> Result<()> {
        // SAFETY: a valid handle.
        Error::check(unsafe { sys::ferry_sync_suspend(self.ptr()) })
    }

    /// Resumes a paused session (`ferry_sync_resume`); a no-op unless paused.
    pub fn resume(&self) -> Result<()> {
        // SAFETY: a valid handle.
        Error::check(unsafe { sys::ferry_sync_resume(self.ptr()) })
    }

    /// Edits a copy of the current subscription set with `edit` and makes it the next version
    /// (state pending), sent to the server; returns that version. See
    /// [`SyncSession::update_subscriptions`].
    pub fn update_subscriptions(
        &self,
        edit: impl FnOnce(&mut MutableSubscriptionSet),
    ) -> Result<u64> {
        let mut set = MutableSubscriptionSet { set: SetHandle::of(self.ptr())?, error: None };
        edit(&mut set);
        if let Some(error) = set.error {
            return Err(error);
        }
        let mut version = 0u64;
        // SAFETY: valid handles and out-parameter.
        let rc = unsafe {
            sys::ferry_sync_update_subscriptions(&mut version, self.ptr(), set.set.ptr())
        };
        Error::check(rc)?;
        Ok(version)
    }

    /// Calls `callback` on the loop thread once the subscription set of `version` (or a later
    /// one) is complete, or with [`ErrorCode::Sync`] and the server's message when it was
    /// rejected.
    pub fn wait_for_subscriptions_with_callback<F>(&self, version: u64, callback: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        start_status(callback, |cb, userdata: *mut c_void| {
            // SAFETY: a valid handle.
            unsafe { sys::ferry_sync_wait_for_subscriptions(self.ptr(), version, cb, userdata) }
        })
    }

    /// Calls `callback` on the loop thread once every local change committed before this call
    /// is durable on the server, or with the error that stopped the session.
    pub fn wait_for_upload_with_callback<F>(&self, callback: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        start_status(callback, |cb, userdata| {
            // SAFETY: a valid handle.
            unsafe { sys::ferry_sync_wait_for_upload(self.ptr(), cb, userdata) }
        })
    }

    /// Calls `callback` once, on the loop thread, when the write receipt reaches `state` or a
    /// later one, or a final state (a wait for [`ReceiptState::Rejected`] ends
    /// [`ReceiptState::Acknowledged`] when the server accepted the transaction); or with the
    /// error that stopped the session ([`ErrorCode::Closed`] when it was dropped). A receipt
    /// the file never gave is [`ErrorCode::NotFound`] at once (and `callback` is dropped).
    pub fn wait_for_receipt_with_callback<F>(
        &self,
        receipt: u64,
        state: ReceiptState,
        callback: F,
    ) -> Result<()>
    where
        F: FnOnce(Result<Receipt>) + Send + 'static,
    {
        start_receipt(callback, |cb, userdata| {
            // SAFETY: a valid handle.
            unsafe {
                sys::ferry_sync_wait_for_receipt(self.ptr(), receipt, state.raw(), cb, userdata)
            }
        })
    }

    /// Calls `callback` on the loop thread once everything the server had when the request
    /// reached it is integrated locally, or with the error that stopped the session.
    pub fn wait_for_download_with_callback<F>(&self, callback: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        start_status(callback, |cb, userdata| {
            // SAFETY: a valid handle.
            unsafe { sys::ferry_sync_wait_for_download(self.ptr(), cb, userdata) }
        })
    }
}

/// The sync session of a synced database (`ferry_sync_session_t`), from
/// [`App::open_synced`](crate::App::open_synced).
///
/// `Send + Sync`. The blocking waits fail with [`ErrorCode::Timeout`] after their timeout
/// (the wait itself goes on in the background and its result is dropped) and with
/// [`ErrorCode::InvalidArgument`] on Ferry's loop thread; the `_with_callback` variants
/// return at once.
///
/// Dropping the session stops syncing (pending waits complete with [`ErrorCode::Closed`]);
/// the [`Database`](crate::Database) stays usable locally. `ferry_sync_session_free` waits for
/// the loop thread, so it must not run there: when the session is dropped inside a Ferry
/// callback, the binding frees it on a short-lived thread of its own instead. The session
/// keeps its App alive.
pub struct SyncSession {
    raw: NonNull<sys::ferry_sync_session_t>,
    app: Option<Arc<AppInner>>,
    /// The client reset closures libferry may call until the session is freed.
    reset_callbacks: Option<ResetCallbacks>,
    /// Serialises this handle's read-edit-commit cycles of the subscription set.
    update_lock: Mutex<()>,
}

// SAFETY: libferry handles may be used from any thread; calls on them are serialised.
unsafe impl Send for SyncSession {}
unsafe impl Sync for SyncSession {}

impl fmt::Debug for SyncSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncSession").field("handle", &self.raw).finish()
    }
}

impl SyncSession {
    /// Takes ownership of a session handle opened with options whose reset closures are
    /// `reset_callbacks` (kept until the handle is freed).
    pub(crate) fn from_raw(
        raw: NonNull<sys::ferry_sync_session_t>,
        app: Arc<AppInner>,
        reset_callbacks: ResetCallbacks,
    ) -> Self {
        SyncSession {
            raw,
            app: Some(app),
            reset_callbacks: Some(reset_callbacks),
            update_lock: Mutex::new(()),
        }
    }

    /// The session as a [`SessionRef`] (what the error handler gets).
    pub fn session_ref(&self) -> SessionRef<'_> {
        // SAFETY: the handle lives as long as `self`.
        unsafe { SessionRef::lent(self.raw) }
    }

    /// The raw handle, for calling `sys` functions directly. It stays valid while `self` lives.
    pub fn as_ptr(&self) -> *mut sys::ferry_sync_session_t {
        self.raw.as_ptr()
    }

    /// The session's id, equal to the [`SessionRef::id`] the error handler sees for it.
    pub fn id(&self) -> SessionId {
        self.session_ref().id()
    }

    /// A snapshot of the current subscription set: version, state, the server's error
    /// message for a rejected set, and the subscriptions.
    pub fn subscriptions(&self) -> Result<Subscriptions> {
        self.session_ref().subscriptions()
    }

    /// [`SessionRef::connection_state`].
    pub fn connection_state(&self) -> Result<ConnectionState> {
        self.session_ref().connection_state()
    }

    /// [`SessionRef::state`].
    pub fn state(&self) -> Result<SessionState> {
        self.session_ref().state()
    }

    /// [`SessionRef::suspend`].
    pub fn suspend(&self) -> Result<()> {
        self.session_ref().suspend()
    }

    /// [`SessionRef::resume`].
    pub fn resume(&self) -> Result<()> {
        self.session_ref().resume()
    }

    /// Writes a copy of this database, with its data and subscriptions, to a new file that
    /// another user's synced open can use (`ferry_sync_write_copy`). The copy has no sync
    /// identity and no history. Local changes must be uploaded first
    /// ([`SyncSession::wait_for_upload`]); an existing path or unacknowledged changes are
    /// [`ErrorCode::InvalidArgument`].
    pub fn write_copy(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let c = c_string(path.as_ref().as_os_str().as_bytes(), "path")?;
        // SAFETY: a valid handle and a NUL-terminated path that outlives the call.
        Error::check(unsafe { sys::ferry_sync_write_copy(self.session_ref().ptr(), c.as_ptr()) })
    }

    /// Calls `callback(old, new)` on Ferry's loop thread at every change of the session's
    /// connection state, until the returned token is dropped
    /// (`ferry_sync_observe_connection_state`). It must not block for long; a panic in it is
    /// caught and reported on stderr.
    pub fn observe_connection_state<F>(&self, callback: F) -> Result<ConnectionStateToken>
    where
        F: FnMut(ConnectionState, ConnectionState) + Send + 'static,
    {
        session::observe_connection_state(self.as_ptr(), callback)
    }

    /// Registers a progress notifier (`ferry_sync_observe_progress`): `callback` runs on
    /// Ferry's loop thread, first shortly after registration, then as bytes move in
    /// `direction`, until the token is dropped. With [`ProgressMode::ForCurrentWork`] it
    /// covers the work outstanding now and its last report is exactly 1.0.
    pub fn observe_progress<F>(
        &self,
        direction: ProgressDirection,
        mode: ProgressMode,
        callback: F,
    ) -> Result<ProgressToken>
    where
        F: FnMut(Progress) + Send + 'static,
    {
        session::observe_progress(self.as_ptr(), direction, mode, callback)
    }

    /// Replaces the subscription set, atomically, with a copy of the current one edited by
    /// `edit`, as the next version (state pending), and sends it to the server. Returns the
    /// new version, for [`wait_for_subscriptions`](SyncSession::wait_for_subscriptions).
    /// Nothing syncs down until the set has a subscription.
    ///
    /// ```no_run
    /// # fn f(session: &ferry::SyncSession) -> ferry::Result<()> {
    /// # use std::time::Duration;
    /// let version = session.update_subscriptions(|set| {
    ///     set.add("items", "Item", "complexity <= 4");
    /// })?;
    /// session.wait_for_subscriptions(version, Duration::from_secs(30))?;
    /// # Ok(()) }
    /// ```
    ///
    /// Updates through this `SyncSession` from several threads take turns (no update is
    /// lost); an update through a [`SessionRef`] in the error handler does not take part.
    pub fn update_subscriptions(
        &self,
        edit: impl FnOnce(&mut MutableSubscriptionSet),
    ) -> Result<u64> {
        let _turn = self.update_lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.session_ref().update_subscriptions(edit)
    }

    /// Waits up to `timeout` until the subscription set of `version` (or a later one) is
    /// complete. Fails with [`ErrorCode::Sync`] and the server's message when the set was
    /// rejected ([`subscriptions`](SyncSession::subscriptions) then shows
    /// [`SubscriptionState::Error`]).
    pub fn wait_for_subscriptions(&self, version: u64, timeout: Duration) -> Result<()> {
        block_on("wait for subscriptions", timeout, |done| {
            self.wait_for_subscriptions_with_callback(version, move |r| done.complete(r))
        })
    }

    /// Waits up to `timeout` until every local change committed before this call is durable
    /// on the server, or fails with the error that stopped the session.
    pub fn wait_for_upload(&self, timeout: Duration) -> Result<()> {
        block_on("wait for upload", timeout, |done| {
            self.wait_for_upload_with_callback(move |r| done.complete(r))
        })
    }

    /// Waits up to `timeout` until everything the server had when the request reached it is
    /// integrated locally, or fails with the error that stopped the session.
    pub fn wait_for_download(&self, timeout: Duration) -> Result<()> {
        block_on("wait for download", timeout, |done| {
            self.wait_for_download_with_callback(move |r| done.complete(r))
        })
    }

    /// Waits up to `timeout` until the write receipt (from
    /// [`Transaction::commit_with_receipt`](crate::Transaction::commit_with_receipt)) reaches
    /// `state` or a later one, or a final state; returns the receipt as it then is, with its
    /// compensating writes when [`ReceiptState::Rejected`]. Receipts live in the file: after a
    /// restart, open the session again and wait again.
    pub fn wait_for_receipt(
        &self,
        receipt: u64,
        state: ReceiptState,
        timeout: Duration,
    ) -> Result<Receipt> {
        block_on("wait for receipt", timeout, |done| {
            self.wait_for_receipt_with_callback(receipt, state, move |r| done.complete(r))
        })
    }

    /// [`SessionRef::wait_for_receipt_with_callback`].
    pub fn wait_for_receipt_with_callback<F>(
        &self,
        receipt: u64,
        state: ReceiptState,
        callback: F,
    ) -> Result<()>
    where
        F: FnOnce(Result<Receipt>) + Send + 'static,
    {
        self.session_ref().wait_for_receipt_with_callback(receipt, state, callback)
    }

    /// [`SessionRef::wait_for_subscriptions_with_callback`].
    pub fn wait_for_subscriptions_with_callback<F>(&self, version: u64, callback: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        self.session_ref().wait_for_subscriptions_with_callback(version, callback)
    }

    /// [`SessionRef::wait_for_upload_with_callback`].
    pub fn wait_for_upload_with_callback<F>(&self, callback: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        self.session_ref().wait_for_upload_with_callback(callback)
    }

    /// [`SessionRef::wait_for_download_with_callback`].
    pub fn wait_for_download_with_callback<F>(&self, callback: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        self.session_ref().wait_for_download_with_callback(callback)
    }
}

impl Drop for SyncSession {
    fn drop(&mut self) {
        let raw = SendPtr(self.raw.as_ptr());
        let app = self.app.take();
        let reset_callbacks = self.reset_callbacks.take();
        free_off_loop("session", move || {
            let raw = raw;
            // SAFETY: we own the handle, and this is not the loop thread.
            unsafe { sys::ferry_sync_session_free(raw.0) };
            // libferry no longer calls the reset closures; the App goes after its session.
            drop(reset_callbacks);
            drop(app);
        });
    }
}
