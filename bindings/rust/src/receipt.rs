//! Write receipts (`ferry_receipt_t`): where a write transaction's changes are on their way
//! to the server. [`Transaction::commit_with_receipt`](crate::Transaction::commit_with_receipt)
//! gives one; [`Database::receipt_state`](crate::Database::receipt_state) and
//! [`Database::read_receipt`](crate::Database::read_receipt) read it;
//! [`SyncSession::wait_for_receipt`](crate::SyncSession::wait_for_receipt) waits for a state.

use std::os::raw::{c_int, c_void};

use crate::completion::{enter_callback, guard_panic};
use crate::error::{Error, Result};
use crate::schema::string_from;
use crate::sync::CompensatingWrite;
use crate::sys;
use crate::value::Value;

/// `ferry_receipt_state_t`, in order; [`Acknowledged`](ReceiptState::Acknowledged) and
/// [`Rejected`](ReceiptState::Rejected) are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReceiptState {
    /// Committed on this device, not sent yet (or sent before a restart and not answered).
    Local,
    /// Sent to the server; its answer has not come back yet.
    Uploaded,
    /// Durable on the server, and accepted.
    Acknowledged,
    /// The server reverted writes of the transaction (a compensating write, error 231).
    Rejected,
    /// A state this crate does not know (a newer library).
    Other(i32),
}

impl ReceiptState {
    pub(crate) fn from_raw(raw: i32) -> ReceiptState {
        match raw {
            sys::FERRY_RECEIPT_LOCAL => ReceiptState::Local,
            sys::FERRY_RECEIPT_UPLOADED => ReceiptState::Uploaded,
            sys::FERRY_RECEIPT_ACKNOWLEDGED => ReceiptState::Acknowledged,
            sys::FERRY_RECEIPT_REJECTED => ReceiptState::Rejected,
            other => ReceiptState::Other(other),
        }
    }

    pub(crate) fn raw(self) -> i32 {
        match self {
            ReceiptState::Local => sys::FERRY_RECEIPT_LOCAL,
            ReceiptState::Uploaded => sys::FERRY_RECEIPT_UPLOADED,
            ReceiptState::Acknowledged => sys::FERRY_RECEIPT_ACKNOWLEDGED,
            ReceiptState::Rejected => sys::FERRY_RECEIPT_REJECTED,
            ReceiptState::Other(raw) => raw,
        }
    }
}

/// A receipt's state, copied from `ferry_receipt_t`.
#[derive(Debug, Clone, PartialEq)]
pub struct Receipt {
    /// The receipt (0: a transaction that changed nothing).
    pub receipt: u64,
    /// Its state.
    pub state: ReceiptState,
    /// When [`Rejected`](ReceiptState::Rejected): the objects of this transaction the server
    /// reverted, with its reasons.
    pub compensating_writes: Vec<CompensatingWrite>,
}

impl Receipt {
    /// Copies a receipt lent to a callback.
    ///
    /// # Safety
    /// `raw` and everything it points to must be valid (as during the callback).
    pub(crate) unsafe fn from_raw(raw: &sys::ferry_receipt_t) -> Receipt {
        let writes: &[sys::ferry_compensating_write_t] =
            if raw.compensating_writes.is_null() || raw.compensating_writes_count == 0 {
                &[]
            } else {
                std::slice::from_raw_parts(raw.compensating_writes, raw.compensating_writes_count)
            };
        Receipt {
            receipt: raw.receipt,
            state: ReceiptState::from_raw(raw.state),
            compensating_writes: writes
                .iter()
                .map(|w| CompensatingWrite {
                    object_type: string_from(w.object_type).unwrap_or_default(),
                    primary_key: Value::from_raw(&w.primary_key).unwrap_or(Value::Null),
                    reason: string_from(w.reason).unwrap_or_default(),
                })
                .collect(),
        }
    }
}

unsafe extern "C" fn receipt_trampoline<F: FnOnce(Result<Receipt>) + Send>(
    userdata: *mut c_void,
    receipt: *const sys::ferry_receipt_t,
    error: *const sys::ferry_error_t,
) {
    let _scope = enter_callback(true);
    if userdata.is_null() {
        return;
    }
    // SAFETY: userdata is the `Box<F>` of `start_receipt`; libferry calls back once.
    let f = Box::from_raw(userdata as *mut F);
    // SAFETY: a non-NULL receipt or error is valid for the call.
    let result = if !error.is_null() {
        Err(Error::from_lent(error))
    } else if let Some(r) = receipt.as_ref() {
        Ok(Receipt::from_raw(r))
    } else {
        Err(Error::new(
            crate::ErrorCode::Internal,
            "a receipt callback with neither a receipt nor an error",
        ))
    };
    guard_panic("a receipt callback", move || f(result));
}

/// Starts a call that takes a `ferry_receipt_cb`: `call(callback, userdata)`. On failure,
/// `callback` is dropped without being called.
pub(crate) fn start_receipt<F>(
    callback: F,
    call: impl FnOnce(sys::ferry_receipt_cb, *mut c_void) -> c_int,
) -> Result<()>
where
    F: FnOnce(Result<Receipt>) + Send + 'static,
{
    let userdata = Box::into_raw(Box::new(callback)) as *mut c_void;
    let rc = call(Some(receipt_trampoline::<F>), userdata);
    if rc == sys::FERRY_OK {
        return Ok(());
    }
    let error = Error::from_last(rc);
    // SAFETY: the call failed, so libferry never calls back: the box is still ours.
    drop(unsafe { Box::from_raw(userdata as *mut F) });
    Err(error)
}

unsafe extern "C" fn read_trampoline(
    userdata: *mut c_void,
    receipt: *const sys::ferry_receipt_t,
    _error: *const sys::ferry_error_t,
) {
    if userdata.is_null() {
        return;
    }
    // SAFETY: userdata is the `&mut Option<Receipt>` of `start_receipt_sync`, alive for the
    // call, which calls back on its own thread before it returns.
    let slot = &mut *(userdata as *mut Option<Receipt>);
    if let Some(r) = receipt.as_ref() {
        guard_panic("reading a receipt", || *slot = Some(Receipt::from_raw(r)));
    }
}

/// Makes a call that calls a `ferry_receipt_cb` once on this thread before it returns
/// (`ferry_db_read_receipt`); the receipt lands in `slot`.
pub(crate) fn start_receipt_sync(
    slot: &mut Option<Receipt>,
    call: impl FnOnce(sys::ferry_receipt_cb, *mut c_void) -> c_int,
) -> Result<()> {
    let rc = call(Some(read_trampoline), slot as *mut Option<Receipt> as *mut c_void);
    Error::check(rc)
}
