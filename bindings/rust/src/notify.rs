//! Change notifications: closures registered with libferry, and the tokens that unregister
//! them.
//!
//! A closure is handed to libferry as userdata: an `Arc<CallbackState<F>>` turned into a raw
//! pointer, called through an `extern "C"` trampoline that catches panics (unwinding into C is
//! undefined behaviour), and released by the `userdata_free` callback, which libferry runs
//! exactly once: when the token is freed, or before a failing registration returns.
//!
//! It is an `Arc` rather than the plain `Box` one might expect because a callback may free its
//! own token: libferry may then run `userdata_free` while the trampoline is still inside the
//! closure. The trampoline holds its own reference for the duration of the call, so the closure
//! is dropped only after it returns.

use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::thread::{self, ThreadId};

use crate::db::{ClassMeta, Handle};
use crate::error::{Error, ErrorCode, Result};
use crate::sys;
use crate::value::Value;

/// What changed, as reported to a notification callback. Objects are named by their primary
/// keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChangeSet {
    /// Objects that entered the results (or the observed object, when it was created).
    pub inserted: Vec<Value>,
    /// Objects that left the results (or the observed object, when it was deleted).
    pub deleted: Vec<Value>,
    /// Objects in the results that changed.
    pub modified: Vec<Value>,
    /// The names of the properties changed on the modified objects (their union).
    pub modified_properties: Vec<String>,
}

impl ChangeSet {
    /// Whether nothing is reported.
    pub fn is_empty(&self) -> bool {
        self.inserted.is_empty() && self.deleted.is_empty() && self.modified.is_empty()
    }

    /// Copies a change set lent to a callback.
    ///
    /// # Safety
    /// Every array must hold its count of valid elements (or be NULL with count 0).
    unsafe fn from_raw(raw: &sys::ferry_change_set_t, class: &ClassMeta) -> Result<ChangeSet> {
        let keys: &[sys::ferry_property_key_t] =
            if raw.modified_properties.is_null() || raw.modified_properties_count == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(raw.modified_properties, raw.modified_properties_count)
            };
        Ok(ChangeSet {
            inserted: Value::from_raw_array(raw.inserted, raw.inserted_count)?,
            deleted: Value::from_raw_array(raw.deleted, raw.deleted_count)?,
            modified: Value::from_raw_array(raw.modified, raw.modified_count)?,
            modified_properties: keys.iter().map(|&k| class.property_name(k)).collect(),
        })
    }
}

/// A notification registration. Dropping it unregisters: once the drop returns, the callback
/// is not running on another thread and will not run again, and the closure has been dropped.
/// Dropping a token from inside its own callback is allowed.
///
/// A token keeps the database handle's memory alive (not the database open): it may outlive
/// its [`Database`](crate::Database), whose drop stops its notifications.
#[derive(Debug)]
#[must_use = "dropping the token unregisters the callback"]
pub struct NotificationToken {
    raw: NonNull<sys::ferry_notification_token_t>,
    // Dropped after the token is freed (fields drop after `Drop::drop`).
    _db: Arc<Handle>,
}

// SAFETY: tokens may be freed from any thread.
unsafe impl Send for NotificationToken {}
unsafe impl Sync for NotificationToken {}

impl Drop for NotificationToken {
    fn drop(&mut self) {
        // SAFETY: we own the token; this frees it and runs the userdata's free function.
        unsafe { sys::ferry_notification_token_free(self.raw.as_ptr()) }
    }
}

/// A closure and what it needs to turn raw change sets into [`ChangeSet`]s.
struct CallbackState<F> {
    class: Arc<ClassMeta>,
    // libferry may call the trampoline from several threads (with `Delivery::Poll`, whichever
    // threads call `deliver_notifications`), and `F` is only `FnMut + Send`: the mutex makes
    // the calls exclusive.
    callback: Mutex<F>,
    // The thread currently running the callback, to detect re-entry (the callback delivering
    // its own notifications) instead of deadlocking on `callback`.
    running_on: Mutex<Option<ThreadId>>,
    // Whether the database delivers on Ferry's loop thread (`Delivery::Loop`).
    on_loop: bool,
}

impl<F: FnMut(&ChangeSet)> CallbackState<F> {
    fn call(&self, changes: &ChangeSet) {
        let me = thread::current().id();
        let mut callback = match self.callback.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if *self.running_on.lock().unwrap_or_else(PoisonError::into_inner) == Some(me) {
                    eprintln!(
                        "ferry: a notification callback re-entered itself (through \
                         deliver_notifications); the nested call was skipped"
                    );
                    return;
                }
                self.callback.lock().unwrap_or_else(PoisonError::into_inner)
            }
        };
        struct Running<'a>(&'a Mutex<Option<ThreadId>>);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
            }
        }
        *self.running_on.lock().unwrap_or_else(PoisonError::into_inner) = Some(me);
        let _running = Running(&self.running_on);
        (*callback)(changes);
    }
}

/// The `ferry_change_cb` for closures of type `F`.
unsafe extern "C" fn trampoline<F: FnMut(&ChangeSet) + Send>(
    userdata: *mut c_void,
    changes: *const sys::ferry_change_set_t,
) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        if userdata.is_null() || changes.is_null() {
            return;
        }
        // SAFETY: userdata is the `Arc<CallbackState<F>>` given at registration, whose
        // reference is released only by `free_state`, and libferry does not call the callback
        // after it has started `free_state`. Taking our own reference keeps the state alive
        // even if the callback frees its token (and so runs `free_state`) while it runs.
        let state = userdata as *const CallbackState<F>;
        Arc::increment_strong_count(state);
        let state = Arc::from_raw(state);
        let _scope = crate::completion::enter_callback(state.on_loop);
        // SAFETY: the change set is valid for the duration of the callback.
        match ChangeSet::from_raw(&*changes, &state.class) {
            Ok(changes) => state.call(&changes),
            Err(e) => eprintln!("ferry: could not read a change set: {e}"),
        }
    }));
    if outcome.is_err() {
        eprintln!(
            "ferry: a notification callback panicked; the panic was stopped at the C boundary"
        );
    }
}

/// The `ferry_free_fn` for closures of type `F`.
unsafe extern "C" fn free_state<F>(userdata: *mut c_void) {
    if userdata.is_null() {
        return;
    }
    // Dropping the closure runs its captures' destructors, which may panic.
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: userdata came from `Arc::into_raw` in `register`, and libferry runs the free
        // function exactly once. A trampoline still running holds its own reference.
        drop(Arc::from_raw(userdata as *const CallbackState<F>));
    }));
    if outcome.is_err() {
        eprintln!("ferry: dropping a notification callback panicked");
    }
}

/// Registers `callback` through `register(out, callback, userdata, userdata_free)`, a call to
/// `ferry_db_observe_*`.
pub(crate) fn register<F>(
    db: &Arc<Handle>,
    class: Arc<ClassMeta>,
    on_loop: bool,
    callback: F,
    register: impl FnOnce(
        *mut *mut sys::ferry_notification_token_t,
        sys::ferry_change_cb,
        *mut c_void,
        sys::ferry_free_fn,
    ) -> c_int,
) -> Result<NotificationToken>
where
    F: FnMut(&ChangeSet) + Send + 'static,
{
    let state = Arc::new(CallbackState {
        class,
        callback: Mutex::new(callback),
        running_on: Mutex::new(None),
        on_loop,
    });
    let userdata = Arc::into_raw(state) as *mut c_void;
    let mut out = ptr::null_mut();
    // From here on libferry owns `userdata`: on failure it has already run `free_state`.
    let rc = register(&mut out, Some(trampoline::<F>), userdata, Some(free_state::<F>));
    Error::check(rc)?;
    let raw = NonNull::new(out).ok_or_else(|| {
        Error::new(ErrorCode::Internal, "a registration succeeded but returned a NULL token")
    })?;
    Ok(NotificationToken { raw, _db: Arc::clone(db) })
}
