//! One-shot completion callbacks (`ferry_status_cb`, `ferry_user_cb`, `ferry_sync_open_cb`) as
//! Rust closures, the blocking waits built on them, and what the binding knows about Ferry's
//! loop thread.
//!
//! A completion closure is boxed and handed to libferry as userdata. libferry calls the
//! completion exactly once (on its loop thread), and the trampoline takes the box back and
//! frees it; when the call that takes the completion fails, libferry never calls it, and the
//! caller takes the box back instead. So the box is freed exactly once either way.
//!
//! A blocking wait puts an `Arc<Waiter>` into such a closure and waits on its condition
//! variable with a timeout. When the wait times out, the closure still owns its reference: the
//! late completion stores its result into a waiter nobody reads and drops it (a late `User`
//! is freed then), so nothing dangles and nothing leaks.

use std::cell::Cell;
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use crate::error::{Error, ErrorCode, Result};
use crate::sys;

thread_local! {
    /// Set (for good) on a thread once a libferry callback known to run on the loop thread
    /// ran there: sync completions and handlers, and `Delivery::Loop` notifications.
    static ON_LOOP_THREAD: Cell<bool> = const { Cell::new(false) };
    /// How many Ferry callbacks are running on this thread (nested through re-entry).
    static CALLBACK_DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// Marks a callback running on this thread; see [`enter_callback`].
pub(crate) struct CallbackScope(());

impl Drop for CallbackScope {
    fn drop(&mut self) {
        CALLBACK_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Called first thing by every trampoline. `on_loop` says the callback is known to run on
/// Ferry's loop thread.
pub(crate) fn enter_callback(on_loop: bool) -> CallbackScope {
    if on_loop {
        ON_LOOP_THREAD.with(|l| l.set(true));
    }
    CALLBACK_DEPTH.with(|d| d.set(d.get() + 1));
    CallbackScope(())
}

/// Whether the calling thread is Ferry's loop thread (as far as the binding has seen: it
/// learns the thread when the first callback runs there, which is before any host code can).
pub(crate) fn on_loop_thread() -> bool {
    ON_LOOP_THREAD.with(Cell::get)
}

/// Whether a Ferry callback is running on the calling thread.
pub(crate) fn in_callback() -> bool {
    CALLBACK_DEPTH.with(Cell::get) > 0
}

/// A raw pointer that may be moved to another thread (libferry handles may be freed from any
/// thread).
pub(crate) struct SendPtr<T>(pub(crate) *mut T);
// SAFETY: used only for libferry handles, which any thread may free.
unsafe impl<T> Send for SendPtr<T> {}

/// Runs `free` here, or, when called from a Ferry callback (that is, possibly on the loop
/// thread, where `ferry_app_free` and `ferry_sync_session_free` would wait for the loop they
/// block), on a short-lived thread of its own.
pub(crate) fn free_off_loop(what: &'static str, free: impl FnOnce() + Send + 'static) {
    if !(on_loop_thread() || in_callback()) {
        free();
        return;
    }
    let spawned = std::thread::Builder::new().name(format!("ferry-free-{what}")).spawn(free);
    if let Err(e) = spawned {
        eprintln!("ferry: could not start a thread to free a {what} dropped on the loop thread ({e}); it is leaked");
    }
}

/// Calls `f`, stopping a panic at the C boundary.
pub(crate) fn guard_panic(what: &str, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        eprintln!("ferry: {what} panicked; the panic was stopped at the C boundary");
    }
}

// --- ferry_status_cb ---------------------------------------------------------------------------

unsafe extern "C" fn status_trampoline<F: FnOnce(Result<()>) + Send>(
    userdata: *mut c_void,
    error: *const sys::ferry_error_t,
) {
    let _scope = enter_callback(true);
    if userdata.is_null() {
        return;
    }
    // SAFETY: userdata is the `Box<F>` of `start_status`; libferry calls the completion once.
    let f = Box::from_raw(userdata as *mut F);
    // SAFETY: a non-NULL error is valid for the call.
    let result = if error.is_null() { Ok(()) } else { Err(Error::from_lent(error)) };
    guard_panic("a completion callback", move || f(result));
}

/// Starts an asynchronous call that takes a `ferry_status_cb`: `call(callback, userdata)`.
/// On failure, `callback` is dropped without being called.
pub(crate) fn start_status<F>(
    callback: F,
    call: impl FnOnce(sys::ferry_status_cb, *mut c_void) -> c_int,
) -> Result<()>
where
    F: FnOnce(Result<()>) + Send + 'static,
{
    let userdata = Box::into_raw(Box::new(callback)) as *mut c_void;
    let rc = call(Some(status_trampoline::<F>), userdata);
    if rc == sys::FERRY_OK {
        return Ok(());
    }
    // Read the error before dropping the closure, whose captures may call libferry.
    let error = Error::from_last(rc);
    // SAFETY: the call failed, so libferry never calls the completion: the box is still ours.
    drop(unsafe { Box::from_raw(userdata as *mut F) });
    Err(error)
}

// --- ferry_user_cb -----------------------------------------------------------------------------

unsafe extern "C" fn user_trampoline<F: FnOnce(Result<NonNull<sys::ferry_user_t>>) + Send>(
    userdata: *mut c_void,
    user: *mut sys::ferry_user_t,
    error: *const sys::ferry_error_t,
) {
    let _scope = enter_callback(true);
    if userdata.is_null() {
        // Nobody to give the handle to.
        sys::ferry_user_free(user);
        return;
    }
    // SAFETY: userdata is the `Box<F>` of `start_user`; libferry calls the completion once.
    let f = Box::from_raw(userdata as *mut F);
    let result = match (NonNull::new(user), error.is_null()) {
        (Some(user), true) => Ok(user),
        // SAFETY: a non-NULL error is valid for the call.
        (user, false) => {
            if let Some(user) = user {
                sys::ferry_user_free(user.as_ptr());
            }
            Err(Error::from_lent(error))
        }
        (None, true) => Err(Error::new(
            ErrorCode::Internal,
            "a login completed with neither a user nor an error",
        )),
    };
    guard_panic("a login callback", move || f(result));
}

/// Starts an asynchronous call that takes a `ferry_user_cb`. The closure receives the new
/// user handle, which it owns. On failure, `callback` is dropped without being called.
pub(crate) fn start_user<F>(
    callback: F,
    call: impl FnOnce(sys::ferry_user_cb, *mut c_void) -> c_int,
) -> Result<()>
where
    F: FnOnce(Result<NonNull<sys::ferry_user_t>>) + Send + 'static,
{
    let userdata = Box::into_raw(Box::new(callback)) as *mut c_void;
    let rc = call(Some(user_trampoline::<F>), userdata);
    if rc == sys::FERRY_OK {
        return Ok(());
    }
    let error = Error::from_last(rc);
    // SAFETY: the call failed, so libferry never calls the completion: the box is still ours.
    drop(unsafe { Box::from_raw(userdata as *mut F) });
    Err(error)
}

// --- ferry_sync_open_cb ------------------------------------------------------------------------

/// The handles an open hands over: a session and its database, both owned by the receiver.
pub(crate) type Opened = (NonNull<sys::ferry_sync_session_t>, NonNull<sys::ferry_db_t>);

/// Frees what an open handed over when nobody can take it (`ferry_sync_session_free` off the
/// loop thread).
pub(crate) fn free_opened(session: *mut sys::ferry_sync_session_t, db: *mut sys::ferry_db_t) {
    // SAFETY: the caller owns both handles (either may be NULL; both frees accept NULL).
    unsafe { sys::ferry_db_free(db) };
    let session = SendPtr(session);
    free_off_loop("session", move || {
        let session = session;
        // SAFETY: as above; not on the loop thread.
        unsafe { sys::ferry_sync_session_free(session.0) }
    });
}

unsafe extern "C" fn open_trampoline<F: FnOnce(Result<Opened>) + Send>(
    userdata: *mut c_void,
    session: *mut sys::ferry_sync_session_t,
    db: *mut sys::ferry_db_t,
    error: *const sys::ferry_error_t,
) {
    let _scope = enter_callback(true);
    let result = match (NonNull::new(session), NonNull::new(db), error.is_null()) {
        (Some(session), Some(db), true) => Ok((session, db)),
        (_, _, false) => {
            free_opened(session, db);
            // SAFETY: a non-NULL error is valid for the call.
            Err(Error::from_lent(error))
        }
        _ => {
            free_opened(session, db);
            Err(Error::new(
                ErrorCode::Internal,
                "an open completed with neither handles nor an error",
            ))
        }
    };
    if userdata.is_null() {
        if let Ok((session, db)) = result {
            free_opened(session.as_ptr(), db.as_ptr());
        }
        return;
    }
    // SAFETY: userdata is the `Box<F>` of `start_open`; libferry calls the completion once.
    let f = Box::from_raw(userdata as *mut F);
    guard_panic("an open callback", move || f(result));
}

/// Starts `ferry_sync_open_async`: `call(callback, userdata)`. The closure receives the new
/// handles, which it owns. On failure, `callback` is dropped without being called.
pub(crate) fn start_open<F>(
    callback: F,
    call: impl FnOnce(sys::ferry_sync_open_cb, *mut c_void) -> c_int,
) -> Result<()>
where
    F: FnOnce(Result<Opened>) + Send + 'static,
{
    let userdata = Box::into_raw(Box::new(callback)) as *mut c_void;
    let rc = call(Some(open_trampoline::<F>), userdata);
    if rc == sys::FERRY_OK {
        return Ok(());
    }
    let error = Error::from_last(rc);
    // SAFETY: the call failed, so libferry never calls the completion: the box is still ours.
    drop(unsafe { Box::from_raw(userdata as *mut F) });
    Err(error)
}

// --- Blocking waits ----------------------------------------------------------------------------

struct Waiter<T> {
    result: Mutex<Option<Result<T>>>,
    done: Condvar,
}

/// The completing side of a blocking wait, moved into a completion closure.
pub(crate) struct Completer<T>(Arc<Waiter<T>>);

impl<T> Completer<T> {
    pub(crate) fn complete(self, result: Result<T>) {
        let mut slot = self.0.result.lock().unwrap_or_else(PoisonError::into_inner);
        *slot = Some(result);
        self.0.done.notify_all();
    }
}

/// Starts an asynchronous operation with `start` (which hands the [`Completer`] to a
/// completion closure) and blocks until it completes or `timeout` passes
/// ([`ErrorCode::Timeout`]). Refused on Ferry's loop thread, where the completion could never
/// run while it waits.
pub(crate) fn block_on<T>(
    what: &str,
    timeout: Duration,
    start: impl FnOnce(Completer<T>) -> Result<()>,
) -> Result<T> {
    if on_loop_thread() {
        return Err(Error::new(
            ErrorCode::InvalidArgument,
            format!(
                "{what}: a blocking wait on Ferry's loop thread (in a callback) would deadlock; \
                 use the _with_callback variant"
            ),
        ));
    }
    let waiter = Arc::new(Waiter { result: Mutex::new(None), done: Condvar::new() });
    start(Completer(Arc::clone(&waiter)))?;
    let slot = waiter.result.lock().unwrap_or_else(PoisonError::into_inner);
    let (mut slot, _) = waiter
        .done
        .wait_timeout_while(slot, timeout, |r| r.is_none())
        .unwrap_or_else(PoisonError::into_inner);
    match slot.take() {
        Some(result) => result,
        None => Err(Error::new(
            ErrorCode::Timeout,
            format!("{what} did not complete within {timeout:?}"),
        )),
    }
}
