//! Errors: every failing libferry call becomes an [`Error`] with the code the call returned
//! and the message of `ferry_error_last()`.

use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;

use crate::sys;

/// The result type of every fallible operation in this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a call failed: one variant per `FERRY_ERR_*` code of `ferry.h`.
///
/// Codes are never renumbered by libferry; a code this binding does not know (from a newer
/// library) is kept as [`ErrorCode::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `FERRY_ERR_INVALID_ARGUMENT`: a NULL pointer, bad option, out-of-range number...
    InvalidArgument,
    /// `FERRY_ERR_INVALID_HANDLE`: a NULL, freed, or wrong kind of handle.
    InvalidHandle,
    /// `FERRY_ERR_NO_MEMORY`.
    NoMemory,
    /// `FERRY_ERR_IO`: the file system or SQLite failed.
    Io,
    /// `FERRY_ERR_CLOSED`: the database was closed.
    Closed,
    /// `FERRY_ERR_NOT_IN_TRANSACTION`: a write outside a write transaction.
    NotInTransaction,
    /// `FERRY_ERR_ALREADY_IN_TRANSACTION`: a nested begin.
    AlreadyInTransaction,
    /// `FERRY_ERR_NO_SUCH_CLASS`.
    NoSuchClass,
    /// `FERRY_ERR_NO_SUCH_PROPERTY`.
    NoSuchProperty,
    /// `FERRY_ERR_WRONG_TYPE`: a value of the wrong type for the property.
    WrongType,
    /// `FERRY_ERR_NOT_FOUND`: no object with that primary key.
    NotFound,
    /// `FERRY_ERR_DUPLICATE_PRIMARY_KEY`.
    DuplicatePrimaryKey,
    /// `FERRY_ERR_QUERY`: a query that does not parse or does not fit the schema.
    Query,
    /// `FERRY_ERR_INVALID_SCHEMA`.
    InvalidSchema,
    /// `FERRY_ERR_SCHEMA_MISMATCH`: a breaking change against the schema in the file.
    SchemaMismatch,
    /// `FERRY_ERR_MULTIPLE_SYNC_AGENTS`: another process is the sync agent of this file.
    MultipleSyncAgents,
    /// `FERRY_ERR_OUT_OF_RANGE`: a list or results index past the end, or an overflow.
    OutOfRange,
    /// `FERRY_ERR_CORRUPT`: the file is not a Ferry database, or is damaged.
    Corrupt,
    /// `FERRY_ERR_BUSY`: another process held the file's write lock too long.
    Busy,
    /// `FERRY_ERR_NETWORK`: the server could not be reached, or the connection broke.
    Network,
    /// `FERRY_ERR_AUTH`: the server refused the credentials or the token.
    Auth,
    /// `FERRY_ERR_SYNC`: the sync server reported an error (for example a rejected
    /// subscription set).
    Sync,
    /// `FERRY_ERR_TIMEOUT`: the operation did not complete within its timeout.
    Timeout,
    /// `FERRY_ERR_WRITE_REJECTED`: a strict pre-flight check refused a write transaction
    /// (SPEC F-PRECHECK); it was rolled back.
    WriteRejected,
    /// `FERRY_ERR_DECRYPT`: an encrypted file cannot be decrypted: a wrong or missing key, a
    /// key for an unencrypted file, or a page that fails authentication.
    Decrypt,
    /// `FERRY_ERR_INTERNAL`: a bug in Ferry.
    Internal,
    /// A code this binding does not know.
    Unknown(i32),
}

impl ErrorCode {
    /// The code for a raw `FERRY_ERR_*` value. `FERRY_OK` has no `ErrorCode` and maps to
    /// `Unknown(0)`.
    pub fn from_raw(code: c_int) -> ErrorCode {
        use ErrorCode::*;
        match code {
            sys::FERRY_ERR_INVALID_ARGUMENT => InvalidArgument,
            sys::FERRY_ERR_INVALID_HANDLE => InvalidHandle,
            sys::FERRY_ERR_NO_MEMORY => NoMemory,
            sys::FERRY_ERR_IO => Io,
            sys::FERRY_ERR_CLOSED => Closed,
            sys::FERRY_ERR_NOT_IN_TRANSACTION => NotInTransaction,
            sys::FERRY_ERR_ALREADY_IN_TRANSACTION => AlreadyInTransaction,
            sys::FERRY_ERR_NO_SUCH_CLASS => NoSuchClass,
            sys::FERRY_ERR_NO_SUCH_PROPERTY => NoSuchProperty,
            sys::FERRY_ERR_WRONG_TYPE => WrongType,
            sys::FERRY_ERR_NOT_FOUND => NotFound,
            sys::FERRY_ERR_DUPLICATE_PRIMARY_KEY => DuplicatePrimaryKey,
            sys::FERRY_ERR_QUERY => Query,
            sys::FERRY_ERR_INVALID_SCHEMA => InvalidSchema,
            sys::FERRY_ERR_SCHEMA_MISMATCH => SchemaMismatch,
            sys::FERRY_ERR_MULTIPLE_SYNC_AGENTS => MultipleSyncAgents,
            sys::FERRY_ERR_OUT_OF_RANGE => OutOfRange,
            sys::FERRY_ERR_CORRUPT => Corrupt,
            sys::FERRY_ERR_BUSY => Busy,
            sys::FERRY_ERR_NETWORK => Network,
            sys::FERRY_ERR_AUTH => Auth,
            sys::FERRY_ERR_SYNC => Sync,
            sys::FERRY_ERR_TIMEOUT => Timeout,
            sys::FERRY_ERR_WRITE_REJECTED => WriteRejected,
            sys::FERRY_ERR_DECRYPT => Decrypt,
            sys::FERRY_ERR_INTERNAL => Internal,
            other => Unknown(other),
        }
    }

    /// The raw `FERRY_ERR_*` value.
    pub fn as_raw(self) -> c_int {
        use ErrorCode::*;
        match self {
            InvalidArgument => sys::FERRY_ERR_INVALID_ARGUMENT,
            InvalidHandle => sys::FERRY_ERR_INVALID_HANDLE,
            NoMemory => sys::FERRY_ERR_NO_MEMORY,
            Io => sys::FERRY_ERR_IO,
            Closed => sys::FERRY_ERR_CLOSED,
            NotInTransaction => sys::FERRY_ERR_NOT_IN_TRANSACTION,
            AlreadyInTransaction => sys::FERRY_ERR_ALREADY_IN_TRANSACTION,
            NoSuchClass => sys::FERRY_ERR_NO_SUCH_CLASS,
            NoSuchProperty => sys::FERRY_ERR_NO_SUCH_PROPERTY,
            WrongType => sys::FERRY_ERR_WRONG_TYPE,
            NotFound => sys::FERRY_ERR_NOT_FOUND,
            DuplicatePrimaryKey => sys::FERRY_ERR_DUPLICATE_PRIMARY_KEY,
            Query => sys::FERRY_ERR_QUERY,
            InvalidSchema => sys::FERRY_ERR_INVALID_SCHEMA,
            SchemaMismatch => sys::FERRY_ERR_SCHEMA_MISMATCH,
            MultipleSyncAgents => sys::FERRY_ERR_MULTIPLE_SYNC_AGENTS,
            OutOfRange => sys::FERRY_ERR_OUT_OF_RANGE,
            Corrupt => sys::FERRY_ERR_CORRUPT,
            Busy => sys::FERRY_ERR_BUSY,
            Network => sys::FERRY_ERR_NETWORK,
            Auth => sys::FERRY_ERR_AUTH,
            Sync => sys::FERRY_ERR_SYNC,
            Timeout => sys::FERRY_ERR_TIMEOUT,
            WriteRejected => sys::FERRY_ERR_WRITE_REJECTED,
            Decrypt => sys::FERRY_ERR_DECRYPT,
            Internal => sys::FERRY_ERR_INTERNAL,
            Unknown(code) => code,
        }
    }

    /// libferry's short static description of the code (`ferry_strerror`).
    pub fn description(self) -> &'static str {
        // SAFETY: ferry_strerror returns static storage, never NULL.
        unsafe { static_str(sys::ferry_strerror(self.as_raw())) }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

/// A failed libferry call: the code it returned and the message libferry gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What kind of failure.
    pub code: ErrorCode,
    /// libferry's message (from `ferry_error_last()`), or the binding's own for failures
    /// detected before calling the library (for example a name containing NUL).
    pub message: String,
}

impl Error {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error { code, message: message.into() }
    }

    /// The error for a failed call that returned `code`, read from `ferry_error_last()`. Must
    /// be called on the thread that made the call, before any other libferry call.
    pub(crate) fn from_last(code: c_int) -> Error {
        // SAFETY: ferry_error_last never returns NULL; the struct and message stay valid until
        // the next failing call on this thread, and we copy the message out right away.
        let (last_code, message) = unsafe {
            let last = &*sys::ferry_error_last();
            let message = if last.message.is_null() {
                String::new()
            } else {
                CStr::from_ptr(last.message).to_string_lossy().into_owned()
            };
            (last.code, message)
        };
        let code_enum = ErrorCode::from_raw(code);
        if last_code == code {
            Error { code: code_enum, message }
        } else {
            // The library returned a code but did not record it as the last error (a libferry
            // bug): the stored message belongs to an older failure, so do not show it.
            Error {
                code: code_enum,
                message: format!(
                    "{} (libferry did not record this error: ferry_error_last() has code {last_code})",
                    code_enum.description()
                ),
            }
        }
    }

    /// Copies an error lent to a completion callback (`const ferry_error_t *`).
    ///
    /// # Safety
    /// `raw` must point to a valid `ferry_error_t` whose message is NULL or NUL-terminated.
    pub(crate) unsafe fn from_lent(raw: *const sys::ferry_error_t) -> Error {
        let raw = &*raw;
        let message = if raw.message.is_null() {
            String::new()
        } else {
            CStr::from_ptr(raw.message).to_string_lossy().into_owned()
        };
        Error { code: ErrorCode::from_raw(raw.code), message }
    }

    /// Ok for `FERRY_OK`, else the error for `code`.
    pub(crate) fn check(code: c_int) -> Result<()> {
        if code == sys::FERRY_OK {
            Ok(())
        } else {
            Err(Error::from_last(code))
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({}): {}", self.code, self.code.as_raw(), self.message)
    }
}

impl std::error::Error for Error {}

/// A `&'static str` from a static C string.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string in static storage.
pub(crate) unsafe fn static_str(p: *const std::os::raw::c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    CStr::from_ptr(p).to_str().unwrap_or("(invalid UTF-8)")
}
