//! Querying the server online (issue 24): [`User::remote_find`] and [`User::remote_count`] ask
//! the server for its objects with the user's rules, without subscribing or storing them on the
//! device (the seeds' MongoClient path; `ferry_remote_find`, `ferry_remote_count`).

use std::ffi::CString;
use std::os::raw::{c_int, c_void};
use std::ptr::{self, NonNull};
use std::time::Duration;

use crate::app::User;
use crate::completion::{block_on, enter_callback, guard_panic};
use crate::db::{c_string, Field};
use crate::error::{Error, ErrorCode, Result};
use crate::schema::string_from;
use crate::sys;
use crate::value::{raw_values, Value};

/// The most objects one [`User::remote_find`] returns.
pub const REMOTE_FIND_MAX_LIMIT: usize = sys::FERRY_REMOTE_FIND_MAX_LIMIT;

/// One object the server returned: its fields in the server's order, and its text as the server
/// sent it (MongoDB Extended JSON, docs/backend.md).
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteDocument {
    /// The object as a JSON object in Extended JSON (v2, relaxed).
    pub json: String,
    /// Each property's name and value ([`Field::List`] for a list).
    pub fields: Vec<(String, Field)>,
}

impl RemoteDocument {
    /// The field named `name`, if the object has it.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }

    /// The value of a single-valued field (`None` when missing or a list).
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self.field(name) {
            Some(Field::Value(v)) => Some(v),
            _ => None,
        }
    }
}

/// Copies every document out of results and frees them.
///
/// # Safety
/// `results` must be a live `ferry_remote_results_t` owned by the caller.
unsafe fn documents(results: NonNull<sys::ferry_remote_results_t>) -> Result<Vec<RemoteDocument>> {
    struct Owned(NonNull<sys::ferry_remote_results_t>);
    impl Drop for Owned {
        fn drop(&mut self) {
            // SAFETY: we own the handle.
            unsafe { sys::ferry_remote_results_free(self.0.as_ptr()) }
        }
    }
    let owned = Owned(results);
    let r = owned.0.as_ptr();
    let mut count = 0usize;
    Error::check(sys::ferry_remote_results_count(&mut count, r))?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let mut json = ptr::null();
        Error::check(sys::ferry_remote_results_json(&mut json, r, i))?;
        let mut field_count = 0usize;
        Error::check(sys::ferry_remote_results_field_count(&mut field_count, r, i))?;
        let mut fields = Vec::with_capacity(field_count);
        for f in 0..field_count {
            let mut name = ptr::null();
            let mut is_list = false;
            Error::check(sys::ferry_remote_results_field(&mut name, &mut is_list, r, i, f))?;
            let field = if is_list {
                let mut values = ptr::null();
                let mut n = 0usize;
                Error::check(sys::ferry_remote_results_get_list(&mut values, &mut n, r, i, name))?;
                Field::List(Value::from_raw_array(values, n)?)
            } else {
                let mut value = sys::ferry_value_t::zeroed();
                Error::check(sys::ferry_remote_results_get_value(&mut value, r, i, name))?;
                Field::Value(Value::from_raw(&value)?)
            };
            fields.push((string_from(name).unwrap_or_default(), field));
        }
        out.push(RemoteDocument { json: string_from(json).unwrap_or_default(), fields });
    }
    Ok(out)
}

unsafe extern "C" fn find_trampoline<F: FnOnce(Result<Vec<RemoteDocument>>) + Send>(
    userdata: *mut c_void,
    results: *mut sys::ferry_remote_results_t,
    error: *const sys::ferry_error_t,
) {
    let _scope = enter_callback(true);
    if userdata.is_null() {
        sys::ferry_remote_results_free(results);
        return;
    }
    // SAFETY: userdata is the `Box<F>` of `remote_find_with_callback`; called once.
    let f = Box::from_raw(userdata as *mut F);
    let result = match (NonNull::new(results), error.is_null()) {
        (Some(results), true) => documents(results),
        (results, false) => {
            if let Some(results) = results {
                sys::ferry_remote_results_free(results.as_ptr());
            }
            Err(Error::from_lent(error))
        }
        (None, true) => Err(Error::new(
            ErrorCode::Internal,
            "a remote find completed with neither results nor an error",
        )),
    };
    guard_panic("a remote find callback", move || f(result));
}

unsafe extern "C" fn count_trampoline<F: FnOnce(Result<u64>) + Send>(
    userdata: *mut c_void,
    count: u64,
    error: *const sys::ferry_error_t,
) {
    let _scope = enter_callback(true);
    if userdata.is_null() {
        return;
    }
    // SAFETY: userdata is the `Box<F>` of `remote_count_with_callback`; called once.
    let f = Box::from_raw(userdata as *mut F);
    let result = if error.is_null() { Ok(count) } else { Err(Error::from_lent(error)) };
    guard_panic("a remote count callback", move || f(result));
}

/// Hands `callback` to libferry as userdata through `call`; takes it back if the call fails.
fn start<F>(callback: F, call: impl FnOnce(*mut c_void) -> c_int) -> Result<()> {
    let userdata = Box::into_raw(Box::new(callback)) as *mut c_void;
    let rc = call(userdata);
    if rc == sys::FERRY_OK {
        return Ok(());
    }
    let error = Error::from_last(rc);
    // SAFETY: the call failed, so libferry never calls the completion: the box is still ours.
    drop(unsafe { Box::from_raw(userdata as *mut F) });
    Err(error)
}

fn strings(class: &str, query: &str) -> Result<(CString, CString)> {
    Ok((c_string(class.as_bytes(), "class")?, c_string(query.as_bytes(), "query")?))
}

impl User {
    /// The objects of `class` the server holds now that match `query` (Ferry's query language;
    /// `$0`, `$1`, ... from `args`) and that this user's rules let it read, in primary-key
    /// order, at most `limit` (1 to [`REMOTE_FIND_MAX_LIMIT`]). Online only; nothing is
    /// subscribed or stored on the device. Waits up to `timeout`.
    ///
    /// Errors: [`ErrorCode::NoSuchClass`] (the server has no such class), [`ErrorCode::Query`]
    /// (the server refused the query or its arguments), [`ErrorCode::Auth`] (logged out, or
    /// the token refused after a refresh), [`ErrorCode::Sync`] (the Data API is off, sync
    /// paused), [`ErrorCode::Network`], [`ErrorCode::Timeout`], [`ErrorCode::InvalidArgument`].
    pub fn remote_find(
        &self,
        class: &str,
        query: &str,
        args: &[Value],
        limit: usize,
        timeout: Duration,
    ) -> Result<Vec<RemoteDocument>> {
        block_on("remote find", timeout, |done| {
            self.remote_find_with_callback(class, query, args, limit, move |r| done.complete(r))
        })
    }

    /// [`remote_find`](User::remote_find) with a completion on Ferry's loop thread, called
    /// exactly once unless this call fails.
    pub fn remote_find_with_callback<F>(
        &self,
        class: &str,
        query: &str,
        args: &[Value],
        limit: usize,
        callback: F,
    ) -> Result<()>
    where
        F: FnOnce(Result<Vec<RemoteDocument>>) + Send + 'static,
    {
        let (class, query) = strings(class, query)?;
        let raw = raw_values(args);
        start(callback, |userdata| {
            // SAFETY: a valid handle; the strings and arguments outlive the call, which copies them.
            unsafe {
                sys::ferry_remote_find(
                    self.as_ptr(),
                    class.as_ptr(),
                    query.as_ptr(),
                    raw.as_ptr(),
                    raw.len(),
                    limit,
                    Some(find_trampoline::<F>),
                    userdata,
                )
            }
        })
    }

    /// How many objects of `class` the server holds that match `query` (with `args`) and that
    /// this user's rules let it read. Waits up to `timeout`. Errors: as
    /// [`remote_find`](User::remote_find).
    pub fn remote_count(
        &self,
        class: &str,
        query: &str,
        args: &[Value],
        timeout: Duration,
    ) -> Result<u64> {
        block_on("remote count", timeout, |done| {
            self.remote_count_with_callback(class, query, args, move |r| done.complete(r))
        })
    }

    /// [`remote_count`](User::remote_count) with a completion on Ferry's loop thread.
    pub fn remote_count_with_callback<F>(
        &self,
        class: &str,
        query: &str,
        args: &[Value],
        callback: F,
    ) -> Result<()>
    where
        F: FnOnce(Result<u64>) + Send + 'static,
    {
        let (class, query) = strings(class, query)?;
        let raw = raw_values(args);
        start(callback, |userdata| {
            // SAFETY: as in remote_find_with_callback.
            unsafe {
                sys::ferry_remote_count(
                    self.as_ptr(),
                    class.as_ptr(),
                    query.as_ptr(),
                    raw.as_ptr(),
                    raw.len(),
                    Some(count_trampoline::<F>),
                    userdata,
                )
            }
        })
    }
}
