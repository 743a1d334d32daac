//! Raw declarations of `include/ferry.h`.
//!
//! Everything here mirrors the header one to one: the same names, the same `repr(C)` layouts
//! (checked by the `layout` tests below against sizes and offsets measured with a C compiler),
//! and every function. Nothing here is safe to use without reading the header's documentation
//! of the function; the rest of the crate is the safe wrapper.

#![allow(non_camel_case_types, missing_docs)]

use std::os::raw::{c_char, c_int, c_void};

// ---------------------------------------------------------------------------------------------
// Version
// ---------------------------------------------------------------------------------------------

pub const FERRY_VERSION_MAJOR: c_int = 0;
pub const FERRY_VERSION_MINOR: c_int = 1;
pub const FERRY_VERSION_PATCH: c_int = 0;
pub const FERRY_VERSION_STRING: &str = "0.1.0";

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// `ferry_error_code_t`: functions return these as `int`.
pub type ferry_error_code_t = c_int;
pub const FERRY_OK: c_int = 0;
pub const FERRY_ERR_INVALID_ARGUMENT: c_int = -1;
pub const FERRY_ERR_INVALID_HANDLE: c_int = -2;
pub const FERRY_ERR_NO_MEMORY: c_int = -3;
pub const FERRY_ERR_IO: c_int = -4;
pub const FERRY_ERR_CLOSED: c_int = -5;
pub const FERRY_ERR_NOT_IN_TRANSACTION: c_int = -6;
pub const FERRY_ERR_ALREADY_IN_TRANSACTION: c_int = -7;
pub const FERRY_ERR_NO_SUCH_CLASS: c_int = -8;
pub const FERRY_ERR_NO_SUCH_PROPERTY: c_int = -9;
pub const FERRY_ERR_WRONG_TYPE: c_int = -10;
pub const FERRY_ERR_NOT_FOUND: c_int = -11;
pub const FERRY_ERR_DUPLICATE_PRIMARY_KEY: c_int = -12;
pub const FERRY_ERR_QUERY: c_int = -13;
pub const FERRY_ERR_INVALID_SCHEMA: c_int = -14;
pub const FERRY_ERR_SCHEMA_MISMATCH: c_int = -15;
pub const FERRY_ERR_MULTIPLE_SYNC_AGENTS: c_int = -16;
pub const FERRY_ERR_OUT_OF_RANGE: c_int = -17;
pub const FERRY_ERR_CORRUPT: c_int = -18;
pub const FERRY_ERR_BUSY: c_int = -19;
pub const FERRY_ERR_NETWORK: c_int = -20;
pub const FERRY_ERR_AUTH: c_int = -21;
pub const FERRY_ERR_SYNC: c_int = -22;
pub const FERRY_ERR_TIMEOUT: c_int = -23;
pub const FERRY_ERR_WRITE_REJECTED: c_int = -24;
pub const FERRY_ERR_DECRYPT: c_int = -25;
pub const FERRY_ERR_INTERNAL: c_int = -100;

/// The last error on the calling thread.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_error_t {
    /// A `ferry_error_code_t`.
    pub code: c_int,
    /// Never NULL.
    pub message: *const c_char,
}

/// Releases userdata.
pub type ferry_free_fn = Option<unsafe extern "C" fn(userdata: *mut c_void)>;

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

/// `ferry_type_t`.
pub type ferry_type_t = i32;
pub const FERRY_TYPE_NULL: i32 = 0;
pub const FERRY_TYPE_BOOL: i32 = 1;
pub const FERRY_TYPE_INT: i32 = 2;
pub const FERRY_TYPE_DOUBLE: i32 = 3;
pub const FERRY_TYPE_STRING: i32 = 4;
pub const FERRY_TYPE_BINARY: i32 = 5;
pub const FERRY_TYPE_TIMESTAMP: i32 = 6;
pub const FERRY_TYPE_OBJECT_ID: i32 = 7;
pub const FERRY_TYPE_UUID: i32 = 8;
/// Only as a property type.
pub const FERRY_TYPE_LINK: i32 = 9;

/// `u.string` of `ferry_value_t`. Need not be NUL-terminated.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_value_string {
    pub data: *const c_char,
    pub size: usize,
}

/// `u.binary` of `ferry_value_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_value_binary {
    pub data: *const u8,
    pub size: usize,
}

/// `u.timestamp` of `ferry_value_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_value_timestamp {
    pub seconds: i64,
    pub nanoseconds: i32,
}

/// The anonymous union `u` of `ferry_value_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ferry_value_union {
    pub b: bool,
    pub i: i64,
    pub d: f64,
    pub string: ferry_value_string,
    pub binary: ferry_value_binary,
    pub timestamp: ferry_value_timestamp,
    pub object_id: [u8; 12],
    pub uuid: [u8; 16],
}

/// One value of any property type; `type_` (C: `type`) says which union member is meaningful.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ferry_value_t {
    /// `ferry_type_t`, never `FERRY_TYPE_LINK`.
    pub type_: i32,
    pub u: ferry_value_union,
}

impl ferry_value_t {
    /// An all-zero value (`FERRY_TYPE_NULL`).
    pub fn zeroed() -> Self {
        // SAFETY: every field is an integer, float, bool (0 = false), byte array or raw pointer,
        // for all of which the all-zero bit pattern is valid.
        unsafe { std::mem::zeroed() }
    }
}

impl std::fmt::Debug for ferry_value_t {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: the union is 16 plain bytes; reading them as bytes is always valid.
        let bytes: [u8; 16] = unsafe { self.u.uuid };
        f.debug_struct("ferry_value_t").field("type", &self.type_).field("u", &bytes).finish()
    }
}

// ---------------------------------------------------------------------------------------------
// Schema
// ---------------------------------------------------------------------------------------------

#[repr(C)]
pub struct ferry_schema_t {
    _private: [u8; 0],
}

pub type ferry_class_key_t = u32;
pub type ferry_property_key_t = u32;

/// `ferry_property_flags_t`, or-ed.
pub type ferry_property_flags_t = u32;
pub const FERRY_PROPERTY_NORMAL: u32 = 0;
pub const FERRY_PROPERTY_OPTIONAL: u32 = 1;
pub const FERRY_PROPERTY_PRIMARY_KEY: u32 = 2;
pub const FERRY_PROPERTY_INDEXED: u32 = 4;
pub const FERRY_PROPERTY_LIST: u32 = 8;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_property_info_t {
    pub name: *const c_char,
    /// `ferry_type_t` other than `FERRY_TYPE_NULL`.
    pub type_: i32,
    /// `ferry_property_flags_t`, or-ed.
    pub flags: u32,
    /// The target class name for `FERRY_TYPE_LINK`, else NULL.
    pub link_target: *const c_char,
}

/// `ferry_class_flags_t`.
pub type ferry_class_flags_t = u32;
pub const FERRY_CLASS_NORMAL: u32 = 0;
pub const FERRY_CLASS_ASYMMETRIC: u32 = 1;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_class_info_t {
    pub name: *const c_char,
    pub properties: *const ferry_property_info_t,
    pub property_count: usize,
    /// `ferry_class_flags_t`.
    pub flags: u32,
}

// ---------------------------------------------------------------------------------------------
// Databases
// ---------------------------------------------------------------------------------------------

#[repr(C)]
pub struct ferry_db_t {
    _private: [u8; 0],
}

/// `ferry_delivery_t`.
pub type ferry_delivery_t = i32;
pub const FERRY_DELIVERY_LOOP: i32 = 0;
pub const FERRY_DELIVERY_POLL: i32 = 1;

pub const FERRY_DB_OPTIONS_VERSION: u32 = 2;
pub const FERRY_ENCRYPTION_KEY_SIZE: usize = 64;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_db_options_t {
    pub version: u32,
    pub path: *const c_char,
    pub in_memory_identifier: *const c_char,
    pub schema: *const ferry_schema_t,
    /// `ferry_delivery_t`.
    pub delivery: i32,
    pub synced: bool,
    /// Version 2: NULL or `FERRY_ENCRYPTION_KEY_SIZE` bytes.
    pub encryption_key: *const u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_property_value_t {
    pub property: ferry_property_key_t,
    pub value: ferry_value_t,
}

#[repr(C)]
pub struct ferry_object_t {
    _private: [u8; 0],
}

#[repr(C)]
pub struct ferry_results_t {
    _private: [u8; 0],
}

#[repr(C)]
pub struct ferry_notification_token_t {
    _private: [u8; 0],
}

/// What changed; valid for the duration of the callback.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_change_set_t {
    pub inserted: *const ferry_value_t,
    pub inserted_count: usize,
    pub deleted: *const ferry_value_t,
    pub deleted_count: usize,
    pub modified: *const ferry_value_t,
    pub modified_count: usize,
    pub modified_properties: *const ferry_property_key_t,
    pub modified_properties_count: usize,
}

pub type ferry_change_cb =
    Option<unsafe extern "C" fn(userdata: *mut c_void, changes: *const ferry_change_set_t)>;

// --- Querying the server online (issue 24) -----------------------------------------------------

/// The most objects one `ferry_remote_find` returns.
pub const FERRY_REMOTE_FIND_MAX_LIMIT: usize = 100_000;

/// The objects a `ferry_remote_find` returned (owned by whoever the completion gave them to).
#[repr(C)]
pub struct ferry_remote_results_t {
    _private: [u8; 0],
}

/// `ferry_remote_find`'s completion: results owned by the callee and a NULL error, or NULL
/// and the failure (lent for the call).
pub type ferry_remote_find_cb = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        results: *mut ferry_remote_results_t,
        error: *const ferry_error_t,
    ),
>;

/// `ferry_remote_count`'s completion: the count and NULL, or 0 and the failure (lent).
pub type ferry_remote_count_cb =
    Option<unsafe extern "C" fn(userdata: *mut c_void, count: u64, error: *const ferry_error_t)>;

extern "C" {
    // Version
    pub fn ferry_version() -> *const c_char;
    pub fn ferry_version_number() -> c_int;

    // Errors
    pub fn ferry_error_last() -> *const ferry_error_t;
    pub fn ferry_strerror(code: c_int) -> *const c_char;

    // Values
    pub fn ferry_object_id_generate(out: *mut ferry_value_t) -> c_int;

    // Schema
    pub fn ferry_schema_new(
        out: *mut *mut ferry_schema_t,
        classes: *const ferry_class_info_t,
        class_count: usize,
    ) -> c_int;
    pub fn ferry_schema_free(schema: *mut ferry_schema_t);

    // Databases
    pub fn ferry_db_options_init(opts: *mut ferry_db_options_t, version: u32) -> c_int;
    pub fn ferry_db_open(out: *mut *mut ferry_db_t, opts: *const ferry_db_options_t) -> c_int;
    pub fn ferry_db_change_key(
        path: *const c_char,
        old_key: *const u8,
        new_key: *const u8,
    ) -> c_int;
    pub fn ferry_db_close(db: *mut ferry_db_t) -> c_int;
    pub fn ferry_db_free(db: *mut ferry_db_t);
    pub fn ferry_db_is_closed(out: *mut bool, db: *const ferry_db_t) -> c_int;
    pub fn ferry_db_write_copy(db: *mut ferry_db_t, path: *const c_char) -> c_int;

    // Schema of an open database
    pub fn ferry_db_class_count(out: *mut usize, db: *const ferry_db_t) -> c_int;
    pub fn ferry_db_find_class(
        out: *mut ferry_class_key_t,
        db: *const ferry_db_t,
        name: *const c_char,
    ) -> c_int;
    pub fn ferry_db_get_class(
        out: *mut ferry_class_info_t,
        db: *const ferry_db_t,
        cls: ferry_class_key_t,
    ) -> c_int;
    pub fn ferry_db_find_property(
        out: *mut ferry_property_key_t,
        db: *const ferry_db_t,
        cls: ferry_class_key_t,
        name: *const c_char,
    ) -> c_int;
    pub fn ferry_db_get_property(
        out: *mut ferry_property_info_t,
        db: *const ferry_db_t,
        cls: ferry_class_key_t,
        property: ferry_property_key_t,
    ) -> c_int;

    // Write transactions
    pub fn ferry_db_begin_write(db: *mut ferry_db_t) -> c_int;
    pub fn ferry_db_commit(db: *mut ferry_db_t) -> c_int;
    pub fn ferry_db_commit_with_receipt(out_receipt: *mut u64, db: *mut ferry_db_t) -> c_int;
    pub fn ferry_db_cancel(db: *mut ferry_db_t) -> c_int;
    pub fn ferry_db_is_in_transaction(out: *mut bool, db: *const ferry_db_t) -> c_int;

    // Writing objects
    pub fn ferry_object_create(
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        values: *const ferry_property_value_t,
        count: usize,
    ) -> c_int;
    pub fn ferry_object_upsert(
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        values: *const ferry_property_value_t,
        count: usize,
    ) -> c_int;
    pub fn ferry_object_set(
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        primary_key: *const ferry_value_t,
        property: ferry_property_key_t,
        value: *const ferry_value_t,
    ) -> c_int;
    pub fn ferry_object_add_int(
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        primary_key: *const ferry_value_t,
        property: ferry_property_key_t,
        delta: i64,
    ) -> c_int;
    pub fn ferry_object_delete(
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        primary_key: *const ferry_value_t,
    ) -> c_int;
    pub fn ferry_list_insert(
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        primary_key: *const ferry_value_t,
        property: ferry_property_key_t,
        index: usize,
        value: *const ferry_value_t,
    ) -> c_int;
    pub fn ferry_list_set(
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        primary_key: *const ferry_value_t,
        property: ferry_property_key_t,
        index: usize,
        value: *const ferry_value_t,
    ) -> c_int;
    pub fn ferry_list_erase(
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        primary_key: *const ferry_value_t,
        property: ferry_property_key_t,
        index: usize,
    ) -> c_int;
    pub fn ferry_list_clear(
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        primary_key: *const ferry_value_t,
        property: ferry_property_key_t,
    ) -> c_int;

    // Reading objects
    pub fn ferry_object_get(
        out: *mut *mut ferry_object_t,
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        primary_key: *const ferry_value_t,
    ) -> c_int;
    pub fn ferry_object_get_class(
        out: *mut ferry_class_key_t,
        object: *const ferry_object_t,
    ) -> c_int;
    pub fn ferry_object_get_value(
        out: *mut ferry_value_t,
        object: *const ferry_object_t,
        property: ferry_property_key_t,
    ) -> c_int;
    pub fn ferry_object_get_list(
        out_values: *mut *const ferry_value_t,
        out_count: *mut usize,
        object: *const ferry_object_t,
        property: ferry_property_key_t,
    ) -> c_int;
    pub fn ferry_object_free(object: *mut ferry_object_t);

    // Queries
    pub fn ferry_db_query(
        out: *mut *mut ferry_results_t,
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        query: *const c_char,
        args: *const ferry_value_t,
        arg_count: usize,
    ) -> c_int;
    pub fn ferry_results_count(out: *mut usize, results: *const ferry_results_t) -> c_int;
    pub fn ferry_results_get(
        out: *mut *mut ferry_object_t,
        results: *const ferry_results_t,
        index: usize,
    ) -> c_int;
    pub fn ferry_results_free(results: *mut ferry_results_t);

    // Notifications
    pub fn ferry_db_observe_query(
        out: *mut *mut ferry_notification_token_t,
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        query: *const c_char,
        args: *const ferry_value_t,
        arg_count: usize,
        callback: ferry_change_cb,
        userdata: *mut c_void,
        userdata_free: ferry_free_fn,
    ) -> c_int;
    pub fn ferry_db_observe_object(
        out: *mut *mut ferry_notification_token_t,
        db: *mut ferry_db_t,
        cls: ferry_class_key_t,
        primary_key: *const ferry_value_t,
        callback: ferry_change_cb,
        userdata: *mut c_void,
        userdata_free: ferry_free_fn,
    ) -> c_int;
    pub fn ferry_notification_token_free(token: *mut ferry_notification_token_t);
    pub fn ferry_db_notification_fd(out: *mut c_int, db: *const ferry_db_t) -> c_int;
    pub fn ferry_db_deliver_notifications(out_delivered: *mut usize, db: *mut ferry_db_t) -> c_int;

    // History
    pub fn ferry_db_history_count(out: *mut u64, db: *mut ferry_db_t) -> c_int;
    pub fn ferry_db_verify_history(db: *mut ferry_db_t) -> c_int;
}

// ---------------------------------------------------------------------------------------------
// Sync: Apps, users, synced databases, subscriptions, errors
// ---------------------------------------------------------------------------------------------

#[repr(C)]
pub struct ferry_app_t {
    _private: [u8; 0],
}

#[repr(C)]
pub struct ferry_user_t {
    _private: [u8; 0],
}

#[repr(C)]
pub struct ferry_sync_session_t {
    _private: [u8; 0],
}

#[repr(C)]
pub struct ferry_subscription_set_t {
    _private: [u8; 0],
}

/// `ferry_log_level_t`.
pub type ferry_log_level_t = i32;
pub const FERRY_LOG_ALL: i32 = 0;
pub const FERRY_LOG_TRACE: i32 = 1;
pub const FERRY_LOG_DEBUG: i32 = 2;
pub const FERRY_LOG_DETAIL: i32 = 3;
pub const FERRY_LOG_INFO: i32 = 4;
pub const FERRY_LOG_WARN: i32 = 5;
pub const FERRY_LOG_ERROR: i32 = 6;
pub const FERRY_LOG_FATAL: i32 = 7;
pub const FERRY_LOG_OFF: i32 = 8;

/// A log line of the App (message lent for the call). Called on the loop thread.
pub type ferry_log_cb =
    Option<unsafe extern "C" fn(userdata: *mut c_void, level: i32, message: *const c_char)>;

/// Completion of an asynchronous call: error is NULL on success. Called exactly once, on the
/// loop thread.
pub type ferry_status_cb =
    Option<unsafe extern "C" fn(userdata: *mut c_void, error: *const ferry_error_t)>;

pub const FERRY_APP_OPTIONS_VERSION: u32 = 4;

/// Version 4; version 1 ends at `log_userdata`, version 2 at `reconnect_delay_max_ms`,
/// version 3 at `encryption_key` (the later fields take their defaults).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_app_options_t {
    pub version: u32,
    pub app_id: *const c_char,
    pub base_url: *const c_char,
    pub base_directory: *const c_char,
    pub ca_file: *const c_char,
    /// `verify_peer` before version 4; never read (certificates are verified unless
    /// `insecure_skip_verify`).
    pub reserved: bool,
    pub request_timeout_ms: u64,
    /// `ferry_log_level_t`.
    pub log_level: i32,
    pub log_callback: ferry_log_cb,
    pub log_userdata: *mut c_void,
    // version 2
    pub multiplex_sessions: bool,
    pub read_timeout_ms: u64,
    pub ping_interval_ms: u64,
    pub reconnect_delay_min_ms: u64,
    pub reconnect_delay_max_ms: u64,
    // version 3
    /// NULL or `FERRY_ENCRYPTION_KEY_SIZE` bytes: the user cache is encrypted.
    pub encryption_key: *const u8,
    // version 4
    /// True skips certificate and host name checks (tests only); false, the zero value,
    /// verifies.
    pub insecure_skip_verify: bool,
    /// True allows an http:// base URL to a host that is not loopback.
    pub allow_insecure_http: bool,
}

/// `ferry_credentials_kind_t`.
pub type ferry_credentials_kind_t = i32;
pub const FERRY_CREDENTIALS_ANONYMOUS: i32 = 0;
pub const FERRY_CREDENTIALS_EMAIL_PASSWORD: i32 = 1;
pub const FERRY_CREDENTIALS_JWT: i32 = 2;
pub const FERRY_CREDENTIALS_API_KEY: i32 = 3;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_credentials_t {
    /// `ferry_credentials_kind_t`.
    pub kind: i32,
    pub email: *const c_char,
    pub password: *const c_char,
    pub token: *const c_char,
}

/// Login completion: a new user handle owned by the callee and a NULL error, or NULL and the
/// failure (lent for the call).
pub type ferry_user_cb = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        user: *mut ferry_user_t,
        error: *const ferry_error_t,
    ),
>;

/// `ferry_user_state_t`.
pub type ferry_user_state_t = i32;
pub const FERRY_USER_LOGGED_OUT: i32 = 0;
pub const FERRY_USER_LOGGED_IN: i32 = 1;
pub const FERRY_USER_REMOVED: i32 = 2;

/// `ferry_sync_action_t`.
pub type ferry_sync_action_t = i32;
pub const FERRY_SYNC_ACTION_WARNING: i32 = 0;
pub const FERRY_SYNC_ACTION_TRANSIENT: i32 = 1;
pub const FERRY_SYNC_ACTION_APPLICATION_BUG: i32 = 2;
pub const FERRY_SYNC_ACTION_PROTOCOL_VIOLATION: i32 = 3;
pub const FERRY_SYNC_ACTION_DELETE_DATABASE: i32 = 4;
pub const FERRY_SYNC_ACTION_CLIENT_RESET: i32 = 5;
pub const FERRY_SYNC_ACTION_CLIENT_RESET_NO_RECOVERY: i32 = 6;
pub const FERRY_SYNC_ACTION_REVERT_TO_PBS: i32 = 7;
pub const FERRY_SYNC_ACTION_REFRESH_USER: i32 = 8;
pub const FERRY_SYNC_ACTION_REFRESH_LOCATION: i32 = 9;
pub const FERRY_SYNC_ACTION_LOG_OUT_USER: i32 = 10;

/// One object of a write the server rejected and reverted.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_compensating_write_t {
    pub object_type: *const c_char,
    pub primary_key: ferry_value_t,
    pub reason: *const c_char,
}

/// A sync error; everything is lent for the handler's call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_sync_error_t {
    pub code: i32,
    pub message: *const c_char,
    pub is_fatal: bool,
    /// `ferry_sync_action_t`.
    pub action: i32,
    pub compensating_writes: *const ferry_compensating_write_t,
    pub compensating_writes_count: usize,
    // Added for client reset; a host compiled before them reads the fields above only.
    /// A finished automatic reset (the server's code, 208, not fatal), else NULL.
    pub client_reset_report: *const ferry_client_reset_report_t,
    /// A reset handed to the host: where the file moves, else NULL.
    pub client_reset_backup_path: *const c_char,
    /// The same reset's token for `ferry_app_handle_client_reset`, else NULL.
    pub client_reset_token: *const c_char,
}

/// `ferry_revert_kind_t` (SPEC F-NOLOSS).
pub type ferry_revert_kind_t = i32;
pub const FERRY_REVERT_REMOVED: i32 = 0;
pub const FERRY_REVERT_CHANGED: i32 = 1;
pub const FERRY_REVERT_RESTORED: i32 = 2;

/// `ferry_write_kind_t`.
pub type ferry_write_kind_t = i32;
pub const FERRY_WRITE_CREATE: i32 = 0;
pub const FERRY_WRITE_DELETE: i32 = 1;
pub const FERRY_WRITE_SET: i32 = 2;
pub const FERRY_WRITE_ADD_INT: i32 = 3;
pub const FERRY_WRITE_LIST_INSERT: i32 = 4;
pub const FERRY_WRITE_LIST_SET: i32 = 5;
pub const FERRY_WRITE_LIST_ERASE: i32 = 6;
pub const FERRY_WRITE_LIST_CLEAR: i32 = 7;

/// One property's value as the device had it just before a revert.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_reverted_value_t {
    pub property: ferry_property_key_t,
    pub name: *const c_char,
    pub is_list: bool,
    pub value: ferry_value_t,
    pub list: *const ferry_value_t,
    pub list_count: usize,
}

/// One local write a revert undid or discarded.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_local_write_t {
    pub local_version: u64,
    /// `ferry_write_kind_t`.
    pub kind: i32,
    pub property: *const c_char,
    pub value: ferry_value_t,
    pub index: usize,
}

/// What the revert of a compensating write took from one object.
#[repr(C)]
#[derive(Debug)]
pub struct ferry_reverted_object_t {
    pub object_type: *const c_char,
    pub primary_key: ferry_value_t,
    /// `ferry_revert_kind_t`.
    pub revert: i32,
    pub values: *const ferry_reverted_value_t,
    pub values_count: usize,
    pub writes: *const ferry_local_write_t,
    pub writes_count: usize,
}

pub type ferry_sync_error_cb = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        session: *mut ferry_sync_session_t,
        error: *const ferry_sync_error_t,
    ),
>;

/// `ferry_receipt_state_t`: where a write transaction's changes are on their way to the server.
pub type ferry_receipt_state_t = i32;
pub const FERRY_RECEIPT_LOCAL: i32 = 0;
pub const FERRY_RECEIPT_UPLOADED: i32 = 1;
pub const FERRY_RECEIPT_ACKNOWLEDGED: i32 = 2;
pub const FERRY_RECEIPT_REJECTED: i32 = 3;

/// A receipt's state; lent for the call that hands it out.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_receipt_t {
    pub receipt: u64,
    /// `ferry_receipt_state_t`.
    pub state: i32,
    pub compensating_writes: *const ferry_compensating_write_t,
    pub compensating_writes_count: usize,
}

/// A receipt (or, for a failed wait, the error); both lent for the call.
pub type ferry_receipt_cb = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        receipt: *const ferry_receipt_t,
        error: *const ferry_error_t,
    ),
>;

/// `ferry_client_reset_mode_t`.
pub type ferry_client_reset_mode_t = i32;
pub const FERRY_CLIENT_RESET_RECOVER_UNSYNCED_CHANGES: i32 = 0;
pub const FERRY_CLIENT_RESET_RECOVER_OR_DISCARD_UNSYNCED_CHANGES: i32 = 1;
pub const FERRY_CLIENT_RESET_DISCARD_UNSYNCED_CHANGES: i32 = 2;
pub const FERRY_CLIENT_RESET_MANUAL: i32 = 3;

/// `ferry_client_reset_outcome_t`.
pub type ferry_client_reset_outcome_t = i32;
pub const FERRY_CLIENT_RESET_RECOVERED: i32 = 0;
pub const FERRY_CLIENT_RESET_DISCARDED: i32 = 1;

/// One object touched by the device's unsynced changes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_client_reset_entry_t {
    pub object_type: *const c_char,
    pub primary_key: ferry_value_t,
    /// `ferry_client_reset_outcome_t`.
    pub outcome: i32,
    pub reason: *const c_char,
}

/// What a reset kept and dropped; lent for the callback that receives it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_client_reset_report_t {
    pub recovered: bool,
    pub unsynced_changesets: usize,
    pub entries: *const ferry_client_reset_entry_t,
    pub entries_count: usize,
}

/// Called before an automatic reset changes the file; `before` is a read-only handle on a
/// snapshot of the file as it was, lent for the call (freeing it does nothing, closing it
/// fails). Called on the loop thread.
pub type ferry_client_reset_before_cb =
    Option<unsafe extern "C" fn(userdata: *mut c_void, before: *mut ferry_db_t)>;

/// Called after an automatic reset: `before` as above, `after` a handle on the reset database,
/// `report` what was recovered or discarded; all lent for the call. Called on the loop thread.
pub type ferry_client_reset_after_cb = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        before: *mut ferry_db_t,
        after: *mut ferry_db_t,
        report: *const ferry_client_reset_report_t,
    ),
>;

pub const FERRY_SYNC_OPTIONS_VERSION: u32 = 5;

/// `ferry_precheck_mode_t` (SPEC F-PRECHECK).
pub type ferry_precheck_mode_t = i32;
pub const FERRY_PRECHECK_OFF: i32 = 0;
pub const FERRY_PRECHECK_WARN: i32 = 1;
pub const FERRY_PRECHECK_STRICT: i32 = 2;

/// A commit failed the pre-flight check: `writes` (`count` of them) are lent for the call;
/// `committed` is true in WARN mode, false in STRICT mode. Called on the committing thread,
/// inside `ferry_db_commit`.
pub type ferry_precheck_cb = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        writes: *const ferry_compensating_write_t,
        count: usize,
        committed: bool,
    ),
>;

/// `ferry_download_before_open_t`.
pub type ferry_download_before_open_t = i32;
pub const FERRY_DOWNLOAD_BEFORE_OPEN_NEVER: i32 = 0;
pub const FERRY_DOWNLOAD_BEFORE_OPEN_ALWAYS: i32 = 1;
pub const FERRY_DOWNLOAD_BEFORE_OPEN_ONCE: i32 = 2;

/// Fills a new database's subscription set (lent for the call); FERRY_OK commits it. Called on
/// the opening thread, before the open call returns.
pub type ferry_initial_subscriptions_cb = Option<
    unsafe extern "C" fn(userdata: *mut c_void, set: *mut ferry_subscription_set_t) -> c_int,
>;

/// Version 4; version 1 ends at `schema`, version 2 at `rerun_initial_subscriptions`,
/// version 3 at `after_reset_userdata` (the later fields take their defaults).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ferry_sync_options_t {
    pub version: u32,
    pub path: *const c_char,
    pub schema: *const ferry_schema_t,
    // version 2
    /// `ferry_download_before_open_t`.
    pub download_before_open: i32,
    pub open_timeout_ms: u64,
    pub in_memory: bool,
    pub initial_subscriptions: ferry_initial_subscriptions_cb,
    pub initial_subscriptions_userdata: *mut c_void,
    pub rerun_initial_subscriptions: bool,
    // version 3
    /// `ferry_client_reset_mode_t`.
    pub client_reset_mode: i32,
    pub before_reset: ferry_client_reset_before_cb,
    /// Must stay valid until the session is freed.
    pub before_reset_userdata: *mut c_void,
    pub after_reset: ferry_client_reset_after_cb,
    /// Must stay valid until the session is freed.
    pub after_reset_userdata: *mut c_void,
    // version 4
    /// `ferry_precheck_mode_t`.
    pub precheck_mode: i32,
    pub precheck_callback: ferry_precheck_cb,
    /// Must stay valid until the session is freed.
    pub precheck_userdata: *mut c_void,
    // version 5
    /// NULL or `FERRY_ENCRYPTION_KEY_SIZE` bytes (copied during the open).
    pub encryption_key: *const u8,
}

/// Open completion: new session and database handles owned by the callee and a NULL error, or
/// NULL handles and the failure (lent for the call). Called exactly once, on the loop thread.
pub type ferry_sync_open_cb = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        session: *mut ferry_sync_session_t,
        db: *mut ferry_db_t,
        error: *const ferry_error_t,
    ),
>;

/// `ferry_connection_state_t`.
pub type ferry_connection_state_t = i32;
pub const FERRY_CONNECTION_DISCONNECTED: i32 = 0;
pub const FERRY_CONNECTION_CONNECTING: i32 = 1;
pub const FERRY_CONNECTION_CONNECTED: i32 = 2;

/// `ferry_session_state_t`.
pub type ferry_session_state_t = i32;
pub const FERRY_SESSION_ACTIVE: i32 = 0;
pub const FERRY_SESSION_PAUSED: i32 = 1;
pub const FERRY_SESSION_INACTIVE: i32 = 2;

#[repr(C)]
pub struct ferry_connection_state_token_t {
    _private: [u8; 0],
}

/// Called on the loop thread at every change of a session's connection state.
pub type ferry_connection_state_cb =
    Option<unsafe extern "C" fn(userdata: *mut c_void, old_state: i32, new_state: i32)>;

/// `ferry_progress_direction_t`.
pub type ferry_progress_direction_t = i32;
pub const FERRY_PROGRESS_UPLOAD: i32 = 0;
pub const FERRY_PROGRESS_DOWNLOAD: i32 = 1;

/// `ferry_progress_mode_t`.
pub type ferry_progress_mode_t = i32;
pub const FERRY_PROGRESS_REPORT_INDEFINITELY: i32 = 0;
pub const FERRY_PROGRESS_FOR_CURRENT_WORK: i32 = 1;

/// One progress report (lent for the callback's call).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ferry_progress_t {
    pub progress_estimate: f64,
    pub transferred_bytes: u64,
    pub transferable_bytes: u64,
}

#[repr(C)]
pub struct ferry_progress_token_t {
    _private: [u8; 0],
}

/// Called on the loop thread; progress is lent for the call.
pub type ferry_progress_cb =
    Option<unsafe extern "C" fn(userdata: *mut c_void, progress: *const ferry_progress_t)>;

/// `ferry_subscription_state_t`.
pub type ferry_subscription_state_t = i32;
pub const FERRY_SUBSCRIPTIONS_PENDING: i32 = 0;
pub const FERRY_SUBSCRIPTIONS_COMPLETE: i32 = 1;
pub const FERRY_SUBSCRIPTIONS_ERROR: i32 = 2;
pub const FERRY_SUBSCRIPTIONS_SUPERSEDED: i32 = 3;

extern "C" {
    // Apps
    pub fn ferry_app_options_init(opts: *mut ferry_app_options_t, version: u32) -> c_int;
    pub fn ferry_app_new(out: *mut *mut ferry_app_t, opts: *const ferry_app_options_t) -> c_int;
    pub fn ferry_app_reconnect(app: *mut ferry_app_t) -> c_int;
    pub fn ferry_app_free(app: *mut ferry_app_t);
    pub fn ferry_app_log_in(
        app: *mut ferry_app_t,
        credentials: *const ferry_credentials_t,
        callback: ferry_user_cb,
        userdata: *mut c_void,
    ) -> c_int;
    pub fn ferry_app_register_email(
        app: *mut ferry_app_t,
        email: *const c_char,
        password: *const c_char,
        callback: ferry_status_cb,
        userdata: *mut c_void,
    ) -> c_int;
    pub fn ferry_app_log_out(
        app: *mut ferry_app_t,
        user: *mut ferry_user_t,
        callback: ferry_status_cb,
        userdata: *mut c_void,
    ) -> c_int;
    pub fn ferry_app_current_user(out: *mut *mut ferry_user_t, app: *mut ferry_app_t) -> c_int;
    pub fn ferry_app_user_count(out: *mut usize, app: *mut ferry_app_t) -> c_int;
    pub fn ferry_app_get_user(
        out: *mut *mut ferry_user_t,
        app: *mut ferry_app_t,
        index: usize,
    ) -> c_int;

    // Users
    pub fn ferry_user_id(out: *mut *const c_char, user: *const ferry_user_t) -> c_int;
    pub fn ferry_user_state(out: *mut i32, user: *const ferry_user_t) -> c_int;
    pub fn ferry_user_free(user: *mut ferry_user_t);

    // Errors
    pub fn ferry_app_set_sync_error_handler(
        app: *mut ferry_app_t,
        callback: ferry_sync_error_cb,
        userdata: *mut c_void,
        userdata_free: ferry_free_fn,
    ) -> c_int;

    // Write receipts
    pub fn ferry_db_receipt_state(out_state: *mut i32, db: *mut ferry_db_t, receipt: u64) -> c_int;
    pub fn ferry_db_read_receipt(
        db: *mut ferry_db_t,
        receipt: u64,
        callback: ferry_receipt_cb,
        userdata: *mut c_void,
    ) -> c_int;

    // Client reset
    pub fn ferry_app_handle_client_reset(app: *mut ferry_app_t, token: *const c_char) -> c_int;

    // What a compensating write took (SPEC F-NOLOSS)
    pub fn ferry_sync_error_reverted_object(
        out: *mut *const ferry_reverted_object_t,
        error: *const ferry_sync_error_t,
        index: usize,
    ) -> c_int;
    pub fn ferry_reverted_object_copy(
        out: *mut *mut ferry_reverted_object_t,
        object: *const ferry_reverted_object_t,
    ) -> c_int;
    pub fn ferry_reverted_object_free(object: *mut ferry_reverted_object_t);
    pub fn ferry_db_reapply_reverted(
        db: *mut ferry_db_t,
        object: *const ferry_reverted_object_t,
        overrides: *const ferry_property_value_t,
        overrides_count: usize,
    ) -> c_int;

    // Synced databases
    pub fn ferry_sync_options_init(opts: *mut ferry_sync_options_t, version: u32) -> c_int;
    pub fn ferry_sync_open(
        out_session: *mut *mut ferry_sync_session_t,
        out_db: *mut *mut ferry_db_t,
        user: *mut ferry_user_t,
        opts: *const ferry_sync_options_t,
    ) -> c_int;
    pub fn ferry_sync_open_async(
        user: *mut ferry_user_t,
        opts: *const ferry_sync_options_t,
        callback: ferry_sync_open_cb,
        userdata: *mut c_void,
    ) -> c_int;
    pub fn ferry_sync_wait_for_upload(
        session: *mut ferry_sync_session_t,
        callback: ferry_status_cb,
        userdata: *mut c_void,
    ) -> c_int;
    pub fn ferry_sync_wait_for_receipt(
        session: *mut ferry_sync_session_t,
        receipt: u64,
        state: i32,
        callback: ferry_receipt_cb,
        userdata: *mut c_void,
    ) -> c_int;
    pub fn ferry_sync_wait_for_download(
        session: *mut ferry_sync_session_t,
        callback: ferry_status_cb,
        userdata: *mut c_void,
    ) -> c_int;
    pub fn ferry_sync_session_free(session: *mut ferry_sync_session_t);

    // Session state, pause and resume, progress
    pub fn ferry_sync_connection_state(
        out: *mut i32,
        session: *const ferry_sync_session_t,
    ) -> c_int;
    pub fn ferry_sync_session_state(out: *mut i32, session: *const ferry_sync_session_t) -> c_int;
    pub fn ferry_sync_observe_connection_state(
        out: *mut *mut ferry_connection_state_token_t,
        session: *mut ferry_sync_session_t,
        callback: ferry_connection_state_cb,
        userdata: *mut c_void,
        userdata_free: ferry_free_fn,
    ) -> c_int;
    pub fn ferry_connection_state_token_free(token: *mut ferry_connection_state_token_t);
    pub fn ferry_sync_suspend(session: *mut ferry_sync_session_t) -> c_int;
    pub fn ferry_sync_resume(session: *mut ferry_sync_session_t) -> c_int;
    pub fn ferry_sync_write_copy(session: *mut ferry_sync_session_t, path: *const c_char) -> c_int;
    pub fn ferry_sync_observe_progress(
        out: *mut *mut ferry_progress_token_t,
        session: *mut ferry_sync_session_t,
        direction: i32,
        mode: i32,
        callback: ferry_progress_cb,
        userdata: *mut c_void,
        userdata_free: ferry_free_fn,
    ) -> c_int;
    pub fn ferry_progress_token_free(token: *mut ferry_progress_token_t);

    // Subscriptions
    pub fn ferry_sync_subscriptions(
        out: *mut *mut ferry_subscription_set_t,
        session: *mut ferry_sync_session_t,
    ) -> c_int;
    pub fn ferry_subscription_set_free(set: *mut ferry_subscription_set_t);
    pub fn ferry_subscription_set_version(
        out: *mut u64,
        set: *const ferry_subscription_set_t,
    ) -> c_int;
    pub fn ferry_subscription_set_state(
        out: *mut i32,
        set: *const ferry_subscription_set_t,
    ) -> c_int;
    pub fn ferry_subscription_set_error(
        out: *mut *const c_char,
        set: *const ferry_subscription_set_t,
    ) -> c_int;
    pub fn ferry_subscription_set_count(
        out: *mut usize,
        set: *const ferry_subscription_set_t,
    ) -> c_int;
    pub fn ferry_subscription_set_get(
        out_name: *mut *const c_char,
        out_object_type: *mut *const c_char,
        out_query: *mut *const c_char,
        set: *const ferry_subscription_set_t,
        index: usize,
    ) -> c_int;
    pub fn ferry_subscription_set_add(
        set: *mut ferry_subscription_set_t,
        name: *const c_char,
        object_type: *const c_char,
        query: *const c_char,
    ) -> c_int;
    pub fn ferry_subscription_set_remove(
        out_removed: *mut bool,
        set: *mut ferry_subscription_set_t,
        name: *const c_char,
    ) -> c_int;
    pub fn ferry_subscription_set_remove_type(
        out_removed: *mut usize,
        set: *mut ferry_subscription_set_t,
        object_type: *const c_char,
    ) -> c_int;
    pub fn ferry_subscription_set_remove_all(set: *mut ferry_subscription_set_t) -> c_int;
    pub fn ferry_sync_update_subscriptions(
        out_version: *mut u64,
        session: *mut ferry_sync_session_t,
        set: *const ferry_subscription_set_t,
    ) -> c_int;
    pub fn ferry_sync_wait_for_subscriptions(
        session: *mut ferry_sync_session_t,
        version: u64,
        callback: ferry_status_cb,
        userdata: *mut c_void,
    ) -> c_int;

    // Querying the server online (issue 24)
    pub fn ferry_remote_find(
        user: *mut ferry_user_t,
        class_name: *const c_char,
        query: *const c_char,
        args: *const ferry_value_t,
        arg_count: usize,
        limit: usize,
        callback: ferry_remote_find_cb,
        userdata: *mut c_void,
    ) -> c_int;
    pub fn ferry_remote_count(
        user: *mut ferry_user_t,
        class_name: *const c_char,
        query: *const c_char,
        args: *const ferry_value_t,
        arg_count: usize,
        callback: ferry_remote_count_cb,
        userdata: *mut c_void,
    ) -> c_int;
    pub fn ferry_remote_results_count(
        out: *mut usize,
        results: *const ferry_remote_results_t,
    ) -> c_int;
    pub fn ferry_remote_results_json(
        out: *mut *const c_char,
        results: *const ferry_remote_results_t,
        index: usize,
    ) -> c_int;
    pub fn ferry_remote_results_field_count(
        out: *mut usize,
        results: *const ferry_remote_results_t,
        index: usize,
    ) -> c_int;
    pub fn ferry_remote_results_field(
        out_name: *mut *const c_char,
        out_is_list: *mut bool,
        results: *const ferry_remote_results_t,
        index: usize,
        field_index: usize,
    ) -> c_int;
    pub fn ferry_remote_results_get_value(
        out: *mut ferry_value_t,
        results: *const ferry_remote_results_t,
        index: usize,
        property: *const c_char,
    ) -> c_int;
    pub fn ferry_remote_results_get_list(
        out_values: *mut *const ferry_value_t,
        out_count: *mut usize,
        results: *const ferry_remote_results_t,
        index: usize,
        property: *const c_char,
    ) -> c_int;
    pub fn ferry_remote_results_free(results: *mut ferry_remote_results_t);
}

#[cfg(test)]
mod layout {
    //! Sizes and offsets measured with `cc` on x86_64/aarch64 Linux against include/ferry.h.
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn value() {
        assert_eq!(size_of::<ferry_value_t>(), 24);
        assert_eq!(align_of::<ferry_value_t>(), 8);
        assert_eq!(offset_of!(ferry_value_t, type_), 0);
        assert_eq!(offset_of!(ferry_value_t, u), 8);
        assert_eq!(size_of::<ferry_value_union>(), 16);
        assert_eq!(offset_of!(ferry_value_string, size), 8);
        assert_eq!(offset_of!(ferry_value_timestamp, nanoseconds), 8);
    }

    #[test]
    fn structs() {
        assert_eq!(size_of::<ferry_error_t>(), 16);
        assert_eq!(size_of::<ferry_property_info_t>(), 24);
        assert_eq!(offset_of!(ferry_property_info_t, link_target), 16);
        assert_eq!(size_of::<ferry_class_info_t>(), 32);
        assert_eq!(offset_of!(ferry_class_info_t, flags), 24);
        assert_eq!(size_of::<ferry_db_options_t>(), 48);
        assert_eq!(offset_of!(ferry_db_options_t, path), 8);
        assert_eq!(offset_of!(ferry_db_options_t, schema), 24);
        assert_eq!(offset_of!(ferry_db_options_t, delivery), 32);
        assert_eq!(offset_of!(ferry_db_options_t, synced), 36);
        assert_eq!(offset_of!(ferry_db_options_t, encryption_key), 40);
        assert_eq!(size_of::<ferry_property_value_t>(), 32);
        assert_eq!(offset_of!(ferry_property_value_t, value), 8);
        assert_eq!(size_of::<ferry_change_set_t>(), 64);
        assert_eq!(offset_of!(ferry_change_set_t, modified_properties_count), 56);
    }

    #[test]
    fn sync_structs() {
        assert_eq!(size_of::<ferry_app_options_t>(), 136);
        assert_eq!(offset_of!(ferry_app_options_t, app_id), 8);
        assert_eq!(offset_of!(ferry_app_options_t, ca_file), 32);
        assert_eq!(offset_of!(ferry_app_options_t, reserved), 40);
        assert_eq!(offset_of!(ferry_app_options_t, request_timeout_ms), 48);
        assert_eq!(offset_of!(ferry_app_options_t, log_level), 56);
        assert_eq!(offset_of!(ferry_app_options_t, log_callback), 64);
        assert_eq!(offset_of!(ferry_app_options_t, log_userdata), 72);
        assert_eq!(offset_of!(ferry_app_options_t, multiplex_sessions), 80);
        assert_eq!(offset_of!(ferry_app_options_t, read_timeout_ms), 88);
        assert_eq!(offset_of!(ferry_app_options_t, ping_interval_ms), 96);
        assert_eq!(offset_of!(ferry_app_options_t, reconnect_delay_min_ms), 104);
        assert_eq!(offset_of!(ferry_app_options_t, reconnect_delay_max_ms), 112);
        assert_eq!(offset_of!(ferry_app_options_t, encryption_key), 120);
        assert_eq!(offset_of!(ferry_app_options_t, insecure_skip_verify), 128);
        assert_eq!(offset_of!(ferry_app_options_t, allow_insecure_http), 129);
        assert_eq!(size_of::<ferry_credentials_t>(), 32);
        assert_eq!(offset_of!(ferry_credentials_t, email), 8);
        assert_eq!(offset_of!(ferry_credentials_t, token), 24);
        assert_eq!(size_of::<ferry_compensating_write_t>(), 40);
        assert_eq!(offset_of!(ferry_compensating_write_t, primary_key), 8);
        assert_eq!(offset_of!(ferry_compensating_write_t, reason), 32);
        assert_eq!(size_of::<ferry_sync_error_t>(), 64);
        assert_eq!(offset_of!(ferry_sync_error_t, client_reset_report), 40);
        assert_eq!(offset_of!(ferry_sync_error_t, client_reset_backup_path), 48);
        assert_eq!(offset_of!(ferry_sync_error_t, client_reset_token), 56);
        assert_eq!(size_of::<ferry_client_reset_entry_t>(), 48);
        assert_eq!(offset_of!(ferry_client_reset_entry_t, primary_key), 8);
        assert_eq!(offset_of!(ferry_client_reset_entry_t, outcome), 32);
        assert_eq!(offset_of!(ferry_client_reset_entry_t, reason), 40);
        assert_eq!(size_of::<ferry_client_reset_report_t>(), 32);
        assert_eq!(offset_of!(ferry_client_reset_report_t, unsynced_changesets), 8);
        assert_eq!(offset_of!(ferry_client_reset_report_t, entries), 16);
        assert_eq!(offset_of!(ferry_client_reset_report_t, entries_count), 24);
        assert_eq!(offset_of!(ferry_sync_error_t, message), 8);
        assert_eq!(offset_of!(ferry_sync_error_t, is_fatal), 16);
        assert_eq!(offset_of!(ferry_sync_error_t, action), 20);
        assert_eq!(offset_of!(ferry_sync_error_t, compensating_writes), 24);
        assert_eq!(offset_of!(ferry_sync_error_t, compensating_writes_count), 32);
        assert_eq!(size_of::<ferry_sync_options_t>(), 136);
        assert_eq!(offset_of!(ferry_sync_options_t, precheck_mode), 104);
        assert_eq!(offset_of!(ferry_sync_options_t, precheck_callback), 112);
        assert_eq!(offset_of!(ferry_sync_options_t, precheck_userdata), 120);
        assert_eq!(offset_of!(ferry_sync_options_t, encryption_key), 128);
        assert_eq!(offset_of!(ferry_sync_options_t, client_reset_mode), 68);
        assert_eq!(offset_of!(ferry_sync_options_t, before_reset), 72);
        assert_eq!(offset_of!(ferry_sync_options_t, before_reset_userdata), 80);
        assert_eq!(offset_of!(ferry_sync_options_t, after_reset), 88);
        assert_eq!(offset_of!(ferry_sync_options_t, after_reset_userdata), 96);
        assert_eq!(offset_of!(ferry_sync_options_t, path), 8);
        assert_eq!(offset_of!(ferry_sync_options_t, schema), 16);
        assert_eq!(offset_of!(ferry_sync_options_t, download_before_open), 24);
        assert_eq!(offset_of!(ferry_sync_options_t, open_timeout_ms), 32);
        assert_eq!(offset_of!(ferry_sync_options_t, in_memory), 40);
        assert_eq!(offset_of!(ferry_sync_options_t, initial_subscriptions), 48);
        assert_eq!(offset_of!(ferry_sync_options_t, initial_subscriptions_userdata), 56);
        assert_eq!(offset_of!(ferry_sync_options_t, rerun_initial_subscriptions), 64);
        assert_eq!(size_of::<ferry_progress_t>(), 24);
        assert_eq!(offset_of!(ferry_progress_t, transferable_bytes), 16);
    }
}
