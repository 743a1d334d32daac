//! Apps and users: the client side of a Ferry server's app (`ferry_app_*`, `ferry_user_*`).

use std::ffi::CString;
use std::fmt;
use std::os::raw::{c_char, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use crate::completion::{
    self, block_on, enter_callback, free_off_loop, guard_panic, start_open, start_status,
    start_user, SendPtr,
};
use crate::db::{c_string, Database, Delivery};
use crate::error::{Error, ErrorCode, Result};
use crate::open::{millis, SyncOptions};
use crate::schema::{string_from, Schema};
use crate::sync::{SessionRef, SyncError, SyncSession};
use crate::sys;

/// How much an [`App`] logs (`ferry_log_level_t`): lines at this level and above reach the
/// [`AppOptions::logger`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum LogLevel {
    /// Everything.
    All,
    /// `FERRY_LOG_TRACE`.
    Trace,
    /// `FERRY_LOG_DEBUG`.
    Debug,
    /// `FERRY_LOG_DETAIL`.
    Detail,
    /// `FERRY_LOG_INFO` (the default).
    #[default]
    Info,
    /// `FERRY_LOG_WARN`.
    Warn,
    /// `FERRY_LOG_ERROR`.
    Error,
    /// `FERRY_LOG_FATAL`.
    Fatal,
    /// Nothing.
    Off,
}

impl LogLevel {
    fn as_raw(self) -> i32 {
        match self {
            LogLevel::All => sys::FERRY_LOG_ALL,
            LogLevel::Trace => sys::FERRY_LOG_TRACE,
            LogLevel::Debug => sys::FERRY_LOG_DEBUG,
            LogLevel::Detail => sys::FERRY_LOG_DETAIL,
            LogLevel::Info => sys::FERRY_LOG_INFO,
            LogLevel::Warn => sys::FERRY_LOG_WARN,
            LogLevel::Error => sys::FERRY_LOG_ERROR,
            LogLevel::Fatal => sys::FERRY_LOG_FATAL,
            LogLevel::Off => sys::FERRY_LOG_OFF,
        }
    }

    fn from_raw(raw: i32) -> LogLevel {
        match raw {
            sys::FERRY_LOG_ALL => LogLevel::All,
            sys::FERRY_LOG_TRACE => LogLevel::Trace,
            sys::FERRY_LOG_DEBUG => LogLevel::Debug,
            sys::FERRY_LOG_DETAIL => LogLevel::Detail,
            sys::FERRY_LOG_INFO => LogLevel::Info,
            sys::FERRY_LOG_WARN => LogLevel::Warn,
            sys::FERRY_LOG_ERROR => LogLevel::Error,
            sys::FERRY_LOG_FATAL => LogLevel::Fatal,
            _ => LogLevel::Off,
        }
    }
}

/// A log sink: called on Ferry's loop thread with each line at or above
/// [`AppOptions::log_level`]. It must not block for long.
pub type Logger = Arc<dyn Fn(LogLevel, &str) + Send + Sync + 'static>;

/// How to create an [`App`] (`ferry_app_options_t`).
///
/// ```no_run
/// # use ferry::{App, AppOptions};
/// # fn main() -> ferry::Result<()> {
/// let app = App::new(AppOptions {
///     app_id: "item-app-seeds".into(),
///     base_url: "http://127.0.0.1:9090".into(),
///     base_directory: "/var/lib/my-app/ferry".into(),
///     ..AppOptions::default()
/// })?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AppOptions {
    /// Required: the app id of the server's app configuration.
    pub app_id: String,
    /// Required: `https://host:port`, or `http://host:port` for a loopback host (`localhost`,
    /// 127.0.0.0/8, `::1`); plain http to any other host is [`ErrorCode::InvalidArgument`]
    /// unless [`allow_insecure_http`](AppOptions::allow_insecure_http).
    pub base_url: String,
    /// Required, must exist: the user cache lives here.
    pub base_directory: PathBuf,
    /// A PEM CA bundle for https/wss, trusted besides the system's CAs; `None`: the system's
    /// CAs only.
    pub ca_file: Option<PathBuf>,
    /// `true` skips certificate and host name checks, so anyone on the path can read and
    /// change the traffic: for tests only. Default `false`.
    pub insecure_skip_verify: bool,
    /// `true` allows an `http://` base URL to a host that is not loopback (logins, tokens and
    /// data cross the network unencrypted). Default `false`.
    pub allow_insecure_http: bool,
    /// Timeout of each HTTP request (default 60 s; rounded to milliseconds, at least 1 ms).
    pub request_timeout: Duration,
    /// Lines below this level are not logged (default [`LogLevel::Info`]).
    pub log_level: LogLevel,
    /// Where log lines go; `None` (the default): nowhere.
    pub logger: Option<Logger>,
    /// `true` (the default): a user's sessions share one connection; `false`: one connection
    /// per session.
    pub multiplex_sessions: bool,
    /// A connection that receives nothing for this long is dropped and retried (default
    /// 120 s).
    pub read_timeout: Duration,
    /// A quiet connection pings the server this often (default 60 s).
    pub ping_interval: Duration,
    /// The first retry after a failed connection waits about this long (default 1 s); each
    /// failure doubles it up to [`reconnect_delay_max`](AppOptions::reconnect_delay_max).
    pub reconnect_delay_min: Duration,
    /// The reconnection backoff's cap (default 16 s; at least `reconnect_delay_min`).
    pub reconnect_delay_max: Duration,
    /// `Some(key)`: the user cache in `base_directory` (user ids and tokens) is encrypted
    /// like a database file (an unencrypted cache is encrypted at once); an encrypted cache
    /// without its key is [`ErrorCode::Decrypt`]. `Debug` never shows it.
    pub encryption_key: Option<[u8; 64]>,
}

impl AppOptions {
    /// Options with the three required fields and defaults for the rest.
    pub fn new(
        app_id: impl Into<String>,
        base_url: impl Into<String>,
        base_directory: impl AsRef<Path>,
    ) -> AppOptions {
        AppOptions {
            app_id: app_id.into(),
            base_url: base_url.into(),
            base_directory: base_directory.as_ref().to_path_buf(),
            ..AppOptions::default()
        }
    }
}

impl Default for AppOptions {
    /// Empty required fields (fill them in) and libferry's defaults for the rest.
    fn default() -> AppOptions {
        AppOptions {
            app_id: String::new(),
            base_url: String::new(),
            base_directory: PathBuf::new(),
            ca_file: None,
            insecure_skip_verify: false,
            allow_insecure_http: false,
            request_timeout: Duration::from_secs(60),
            log_level: LogLevel::Info,
            logger: None,
            multiplex_sessions: true,
            read_timeout: Duration::from_secs(120),
            ping_interval: Duration::from_secs(60),
            reconnect_delay_min: Duration::from_secs(1),
            reconnect_delay_max: Duration::from_secs(16),
            encryption_key: None,
        }
    }
}

impl fmt::Debug for AppOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppOptions")
            .field("app_id", &self.app_id)
            .field("base_url", &self.base_url)
            .field("base_directory", &self.base_directory)
            .field("ca_file", &self.ca_file)
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("request_timeout", &self.request_timeout)
            .field("log_level", &self.log_level)
            .field("logger", &self.logger.as_ref().map(|_| "Fn(LogLevel, &str)"))
            .field("multiplex_sessions", &self.multiplex_sessions)
            .field("read_timeout", &self.read_timeout)
            .field("ping_interval", &self.ping_interval)
            .field("reconnect_delay_min", &self.reconnect_delay_min)
            .field("reconnect_delay_max", &self.reconnect_delay_max)
            .field("encryption_key", &self.encryption_key.map(|_| "<64-byte encryption key>"))
            .finish()
    }
}

/// How a user logs in (`ferry_credentials_t`). `Debug` does not show secrets.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// A new anonymous user each time.
    Anonymous,
    /// An email/password user registered with [`App::register_email`].
    EmailPassword {
        /// The email address.
        email: String,
        /// The password.
        password: String,
    },
    /// A JWT of the host's own auth system (the server's custom-token provider).
    Jwt(String),
    /// An API key.
    ApiKey(String),
}

impl Credentials {
    /// Email/password credentials.
    pub fn email_password(email: impl Into<String>, password: impl Into<String>) -> Credentials {
        Credentials::EmailPassword { email: email.into(), password: password.into() }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::EmailPassword { email, .. } => f
                .debug_struct("EmailPassword")
                .field("email", email)
                .field("password", &"***")
                .finish(),
            Credentials::Jwt(_) => f.write_str("Jwt(***)"),
            Credentials::ApiKey(_) => f.write_str("ApiKey(***)"),
        }
    }
}

/// A user's state (`ferry_user_state_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UserState {
    /// Logged out (still cached on the device).
    LoggedOut,
    /// Logged in.
    LoggedIn,
    /// Removed.
    Removed,
    /// A state this binding does not know.
    Unknown(i32),
}

/// A user of an [`App`] (`ferry_user_t`): logged in now or earlier on this device. Several
/// `User` values may stand for the same user (each is its own handle); compare [`id`](User::id)s.
pub struct User {
    raw: NonNull<sys::ferry_user_t>,
    id: String,
    app: Weak<AppInner>,
}

// SAFETY: libferry handles may be used and freed from any thread.
unsafe impl Send for User {}
unsafe impl Sync for User {}

impl User {
    /// Takes ownership of a user handle.
    fn from_raw(raw: NonNull<sys::ferry_user_t>, app: Weak<AppInner>) -> Result<User> {
        let mut id = ptr::null();
        // SAFETY: a valid handle and out-parameter; the id is lent for the handle's lifetime
        // and copied right away.
        let rc = unsafe { sys::ferry_user_id(&mut id, raw.as_ptr()) };
        if rc != sys::FERRY_OK {
            let error = Error::from_last(rc);
            // SAFETY: we own the handle.
            unsafe { sys::ferry_user_free(raw.as_ptr()) };
            return Err(error);
        }
        // SAFETY: a lent, NUL-terminated string.
        let id = unsafe { string_from(id) }.unwrap_or_default();
        Ok(User { raw, id, app })
    }

    /// The user's id (the server's, the same on every device).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The user's current state.
    pub fn state(&self) -> Result<UserState> {
        let mut out = 0i32;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_user_state(&mut out, self.raw.as_ptr()) })?;
        Ok(match out {
            sys::FERRY_USER_LOGGED_OUT => UserState::LoggedOut,
            sys::FERRY_USER_LOGGED_IN => UserState::LoggedIn,
            sys::FERRY_USER_REMOVED => UserState::Removed,
            other => UserState::Unknown(other),
        })
    }

    /// Whether the user is logged in.
    pub fn is_logged_in(&self) -> bool {
        matches!(self.state(), Ok(UserState::LoggedIn))
    }

    /// The raw handle, for calling `sys` functions directly. It stays valid while `self` lives.
    pub fn as_ptr(&self) -> *mut sys::ferry_user_t {
        self.raw.as_ptr()
    }
}

impl fmt::Debug for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("User").field("id", &self.id).finish()
    }
}

impl Drop for User {
    fn drop(&mut self) {
        // SAFETY: we own the handle; ferry_user_free may run on any thread.
        unsafe { sys::ferry_user_free(self.raw.as_ptr()) }
    }
}

/// A sync error handler, as stored by the App.
type Handler = Arc<dyn Fn(Option<SessionRef<'_>>, &SyncError) + Send + Sync + 'static>;

/// What the App's C error handler and log callback point to.
#[derive(Default)]
struct Callbacks {
    handler: Mutex<Option<Handler>>,
    logger: Mutex<Option<Logger>>,
}

/// The App's handle, freed when the last [`App`] clone and the last [`SyncSession`] are gone.
pub(crate) struct AppInner {
    raw: NonNull<sys::ferry_app_t>,
    callbacks: Arc<Callbacks>,
    /// Whether the C error handler (pointing to `callbacks`) was registered.
    handler_registered: Mutex<bool>,
}

// SAFETY: libferry handles may be used from any thread; calls on them are serialised.
unsafe impl Send for AppInner {}
unsafe impl Sync for AppInner {}

impl AppInner {
    pub(crate) fn ptr(&self) -> *mut sys::ferry_app_t {
        self.raw.as_ptr()
    }
}

impl Drop for AppInner {
    fn drop(&mut self) {
        let raw = SendPtr(self.raw.as_ptr());
        let callbacks = Arc::clone(&self.callbacks);
        free_off_loop("app", move || {
            let raw = raw;
            // SAFETY: we own the handle, and this is not the loop thread. It frees the error
            // handler's userdata (one reference to `callbacks`).
            unsafe { sys::ferry_app_free(raw.0) };
            // The log callback's userdata has no free function: its reference to `callbacks`
            // is leaked on purpose (a few words), in case libferry logs after the free. The
            // closure itself (and what it captured) goes now.
            callbacks.logger.lock().unwrap_or_else(PoisonError::into_inner).take();
            callbacks.handler.lock().unwrap_or_else(PoisonError::into_inner).take();
        });
    }
}

unsafe extern "C" fn log_trampoline(userdata: *mut c_void, level: i32, message: *const c_char) {
    let _scope = enter_callback(true);
    if userdata.is_null() {
        return;
    }
    // SAFETY: userdata is a reference to `Callbacks` that is never released (see AppInner).
    let callbacks = &*(userdata as *const Callbacks);
    let logger = callbacks.logger.lock().unwrap_or_else(PoisonError::into_inner).clone();
    if let Some(logger) = logger {
        // SAFETY: the message is lent for the call.
        let message = string_from(message).unwrap_or_default();
        guard_panic("a logger", || logger(LogLevel::from_raw(level), &message));
    }
}

unsafe extern "C" fn error_trampoline(
    userdata: *mut c_void,
    session: *mut sys::ferry_sync_session_t,
    error: *const sys::ferry_sync_error_t,
) {
    let _scope = enter_callback(true);
    if userdata.is_null() || error.is_null() {
        return;
    }
    // SAFETY: userdata is the `Arc<Callbacks>` reference given at registration, released only
    // by `free_callbacks` when the App is freed.
    let callbacks = &*(userdata as *const Callbacks);
    // Clone the handler and call it outside the lock: it may replace itself.
    let handler = callbacks.handler.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let Some(handler) = handler else { return };
    // Copy everything out of the lent structs before calling.
    // SAFETY: the error and its arrays are valid for the call.
    let error = SyncError::from_raw(&*error);
    // SAFETY: the session is lent for the call (NULL when the host already freed it).
    let session = NonNull::new(session).map(|s| SessionRef::lent(s));
    guard_panic("the sync error handler", || handler(session, &error));
}

unsafe extern "C" fn free_callbacks(userdata: *mut c_void) {
    if !userdata.is_null() {
        guard_panic("dropping the sync error handler", || {
            // SAFETY: the reference `set_sync_error_handler` gave away; libferry frees it once.
            drop(Arc::from_raw(userdata as *const Callbacks));
        });
    }
}

/// A Ferry App (`ferry_app_t`): one server and one app on it, the users logged in on this
/// device, and their synced databases.
///
/// Network work runs on Ferry's loop thread. The blocking methods (`log_in`,
/// `register_email`, `log_out`, and the waits of [`SyncSession`]) wait on the calling thread
/// for the loop's completion, up to a timeout; they fail with [`ErrorCode::InvalidArgument`]
/// when called on the loop thread (from a Ferry callback), where they could only deadlock.
/// Each has a `_with_callback` variant that returns at once and calls a closure on the loop
/// thread instead.
///
/// `App` is `Send + Sync` and cheap to clone (clones share the handle). The handle is freed
/// when the last clone and the last [`SyncSession`] opened through it are dropped: a session
/// keeps its App alive. If that happens on the loop thread (in a callback), the free runs on
/// a short-lived thread of its own, since `ferry_app_free` must not run on the loop thread.
#[derive(Clone)]
pub struct App {
    inner: Arc<AppInner>,
}

impl fmt::Debug for App {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("App").field("handle", &self.inner.ptr()).finish()
    }
}

impl App {
    /// Creates an App (`ferry_app_new`). Users who logged in earlier on this device are
    /// loaded from the cache in `base_directory` (offline too).
    ///
    /// Errors: [`ErrorCode::InvalidArgument`] (a missing or malformed option, a zero read
    /// timeout or ping interval, reconnect delays that are zero or whose maximum is below the
    /// minimum, an `http://` base URL to a host that is not loopback without
    /// [`allow_insecure_http`](AppOptions::allow_insecure_http)), [`ErrorCode::Io`].
    pub fn new(options: AppOptions) -> Result<App> {
        let mut raw: sys::ferry_app_options_t = unsafe {
            // SAFETY: integers, bools, NULL pointers and a None function pointer are valid
            // as zeroes; ferry_app_options_init fills in the defaults.
            std::mem::zeroed()
        };
        // SAFETY: a valid out-parameter.
        Error::check(unsafe {
            sys::ferry_app_options_init(&mut raw, sys::FERRY_APP_OPTIONS_VERSION)
        })?;
        let app_id = c_string(options.app_id.as_bytes(), "app_id")?;
        let base_url = c_string(options.base_url.as_bytes(), "base_url")?;
        let base_directory =
            c_string(options.base_directory.as_os_str().as_bytes(), "base_directory")?;
        let ca_file: Option<CString> = options
            .ca_file
            .as_ref()
            .map(|p| c_string(p.as_os_str().as_bytes(), "ca_file"))
            .transpose()?;
        raw.app_id = app_id.as_ptr();
        raw.base_url = base_url.as_ptr();
        raw.base_directory = base_directory.as_ptr();
        raw.ca_file = ca_file.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        raw.insecure_skip_verify = options.insecure_skip_verify;
        raw.allow_insecure_http = options.allow_insecure_http;
        raw.request_timeout_ms =
            u64::try_from(options.request_timeout.as_millis()).unwrap_or(u64::MAX).max(1);
        raw.log_level = options.log_level.as_raw();
        raw.multiplex_sessions = options.multiplex_sessions;
        raw.read_timeout_ms = millis(options.read_timeout);
        raw.ping_interval_ms = millis(options.ping_interval);
        raw.reconnect_delay_min_ms = millis(options.reconnect_delay_min);
        raw.reconnect_delay_max_ms = millis(options.reconnect_delay_max);
        // libferry copies the key during ferry_app_new; `options` outlives the call.
        raw.encryption_key = options.encryption_key.as_ref().map_or(ptr::null(), |k| k.as_ptr());

        let callbacks = Arc::new(Callbacks::default());
        let has_logger = options.logger.is_some();
        *callbacks.logger.lock().unwrap_or_else(PoisonError::into_inner) = options.logger;
        if has_logger {
            raw.log_callback = Some(log_trampoline);
            // Deliberately never released (no free function for log_userdata): see AppInner.
            raw.log_userdata = Arc::into_raw(Arc::clone(&callbacks)) as *mut c_void;
        }

        let mut out = ptr::null_mut();
        // SAFETY: the strings outlive the call (libferry copies them).
        let rc = unsafe { sys::ferry_app_new(&mut out, &raw) };
        if rc != sys::FERRY_OK {
            let error = Error::from_last(rc);
            if has_logger {
                // SAFETY: the App was not created, so nothing refers to the logger's reference.
                drop(unsafe { Arc::from_raw(raw.log_userdata as *const Callbacks) });
            }
            return Err(error);
        }
        let raw = NonNull::new(out).ok_or_else(|| {
            Error::new(ErrorCode::Internal, "ferry_app_new succeeded but returned NULL")
        })?;
        Ok(App {
            inner: Arc::new(AppInner { raw, callbacks, handler_registered: Mutex::new(false) }),
        })
    }

    /// The raw handle, for calling `sys` functions directly. It stays valid while `self` lives.
    pub fn as_ptr(&self) -> *mut sys::ferry_app_t {
        self.inner.ptr()
    }

    fn ptr(&self) -> *mut sys::ferry_app_t {
        self.inner.ptr()
    }

    /// Makes every connection of this App that waits to retry try at once, with its backoff
    /// reset (`ferry_app_reconnect`): for example when the host learns the network is back.
    /// Does nothing for connections that are connected or connecting, or whose sessions
    /// stopped on a fatal error. Returns at once.
    pub fn reconnect(&self) -> Result<()> {
        // SAFETY: a valid handle.
        Error::check(unsafe { sys::ferry_app_reconnect(self.ptr()) })
    }

    fn user(&self, raw: NonNull<sys::ferry_user_t>) -> Result<User> {
        User::from_raw(raw, Arc::downgrade(&self.inner))
    }

    // --- Users ---------------------------------------------------------------------------

    /// Logs in and waits up to `timeout` for the server's answer.
    ///
    /// Errors: [`ErrorCode::Auth`] (refused credentials), [`ErrorCode::Network`],
    /// [`ErrorCode::Timeout`] (libferry's request timeout, or `timeout`: the login then goes
    /// on in the background, and a user it logs in is cached and freed).
    pub fn log_in(&self, credentials: Credentials, timeout: Duration) -> Result<User> {
        block_on("log in", timeout, |done| {
            self.log_in_with_callback(&credentials, move |r| done.complete(r))
        })
    }

    /// Logs in and returns at once; `callback` gets the user (or the failure) on Ferry's loop
    /// thread, exactly once, unless this call fails (then it is dropped uncalled).
    pub fn log_in_with_callback<F>(&self, credentials: &Credentials, callback: F) -> Result<()>
    where
        F: FnOnce(Result<User>) + Send + 'static,
    {
        let (kind, a, b) = match credentials {
            Credentials::Anonymous => (sys::FERRY_CREDENTIALS_ANONYMOUS, None, None),
            Credentials::EmailPassword { email, password } => {
                (sys::FERRY_CREDENTIALS_EMAIL_PASSWORD, Some(email), Some(password))
            }
            Credentials::Jwt(token) => (sys::FERRY_CREDENTIALS_JWT, Some(token), None),
            Credentials::ApiKey(key) => (sys::FERRY_CREDENTIALS_API_KEY, Some(key), None),
        };
        let a = a.map(|s| c_string(s.as_bytes(), "credentials")).transpose()?;
        let b = b.map(|s| c_string(s.as_bytes(), "credentials")).transpose()?;
        let p = |c: &Option<CString>| c.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        let raw = match kind {
            sys::FERRY_CREDENTIALS_EMAIL_PASSWORD => {
                sys::ferry_credentials_t { kind, email: p(&a), password: p(&b), token: ptr::null() }
            }
            _ => sys::ferry_credentials_t {
                kind,
                email: ptr::null(),
                password: ptr::null(),
                token: p(&a),
            },
        };
        let app = Arc::downgrade(&self.inner);
        start_user(
            move |result: Result<NonNull<sys::ferry_user_t>>| {
                callback(result.and_then(|raw| User::from_raw(raw, app)))
            },
            |cb, userdata| {
                // SAFETY: a valid handle; the credentials' strings outlive the call.
                unsafe { sys::ferry_app_log_in(self.ptr(), &raw, cb, userdata) }
            },
        )
    }

    /// Registers an email/password user (log in with [`Credentials::EmailPassword`]
    /// afterwards) and waits up to `timeout`.
    pub fn register_email(&self, email: &str, password: &str, timeout: Duration) -> Result<()> {
        block_on("register", timeout, |done| {
            self.register_email_with_callback(email, password, move |r| done.complete(r))
        })
    }

    /// [`register_email`](App::register_email) with a completion on the loop thread.
    pub fn register_email_with_callback<F>(
        &self,
        email: &str,
        password: &str,
        callback: F,
    ) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        let email = c_string(email.as_bytes(), "email")?;
        let password = c_string(password.as_bytes(), "password")?;
        start_status(callback, |cb, userdata| {
            // SAFETY: a valid handle; the strings outlive the call.
            unsafe {
                sys::ferry_app_register_email(
                    self.ptr(),
                    email.as_ptr(),
                    password.as_ptr(),
                    cb,
                    userdata,
                )
            }
        })
    }

    /// Logs a user out and waits up to `timeout`: the server revokes its refresh token (best
    /// effort: works offline), its sessions stop with a fatal error, and it stays cached as
    /// logged out.
    pub fn log_out(&self, user: &User, timeout: Duration) -> Result<()> {
        block_on("log out", timeout, |done| {
            self.log_out_with_callback(user, move |r| done.complete(r))
        })
    }

    /// [`log_out`](App::log_out) with a completion on the loop thread.
    pub fn log_out_with_callback<F>(&self, user: &User, callback: F) -> Result<()>
    where
        F: FnOnce(Result<()>) + Send + 'static,
    {
        start_status(callback, |cb, userdata| {
            // SAFETY: valid handles.
            unsafe { sys::ferry_app_log_out(self.ptr(), user.as_ptr(), cb, userdata) }
        })
    }

    /// The most recently logged-in user still logged in, if any.
    pub fn current_user(&self) -> Result<Option<User>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_app_current_user(&mut out, self.ptr()) })?;
        NonNull::new(out).map(|raw| self.user(raw)).transpose()
    }

    /// Every user cached on this device, most recent first (logged out ones too).
    pub fn users(&self) -> Result<Vec<User>> {
        let mut count = 0usize;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_app_user_count(&mut count, self.ptr()) })?;
        let mut users = Vec::with_capacity(count);
        for index in 0..count {
            let mut out = ptr::null_mut();
            // SAFETY: valid handle and out-parameter.
            match Error::check(unsafe { sys::ferry_app_get_user(&mut out, self.ptr(), index) }) {
                Ok(()) => {}
                // A user removed meanwhile: the list got shorter.
                Err(e) if e.code == ErrorCode::OutOfRange => break,
                Err(e) => return Err(e),
            }
            let raw = NonNull::new(out).ok_or_else(|| {
                Error::new(ErrorCode::Internal, "ferry_app_get_user succeeded but returned NULL")
            })?;
            users.push(self.user(raw)?);
        }
        Ok(users)
    }

    // --- Sync errors ---------------------------------------------------------------------

    /// Sets the App's sync error handler, replacing the previous one. It runs on Ferry's loop
    /// thread for every sync error of every session of this App, after the server's revert
    /// was integrated (so the object of a compensating write is already gone locally). It
    /// gets the session (`None` if its [`SyncSession`] was already dropped) and a copy of the
    /// error. It must not block for long; a panic in it is caught and reported on stderr.
    ///
    /// Replacing or clearing the handler never races with a call of the old one: the old
    /// closure is dropped once no call is using it.
    pub fn set_sync_error_handler<F>(&self, handler: F) -> Result<()>
    where
        F: Fn(Option<SessionRef<'_>>, &SyncError) + Send + Sync + 'static,
    {
        let previous = self
            .inner
            .callbacks
            .handler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(Arc::new(handler));
        drop(previous);
        self.register_error_handler()
    }

    /// Removes the sync error handler: errors are only logged.
    pub fn clear_sync_error_handler(&self) {
        let previous =
            self.inner.callbacks.handler.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(previous);
    }

    /// Registers the C handler once; after that, the Rust closure is swapped in `callbacks`.
    fn register_error_handler(&self) -> Result<()> {
        let mut registered =
            self.inner.handler_registered.lock().unwrap_or_else(PoisonError::into_inner);
        if *registered {
            return Ok(());
        }
        let userdata = Arc::into_raw(Arc::clone(&self.inner.callbacks)) as *mut c_void;
        // SAFETY: a valid handle; libferry owns `userdata` from here on and releases it with
        // free_callbacks exactly once (also if the call fails).
        Error::check(unsafe {
            sys::ferry_app_set_sync_error_handler(
                self.ptr(),
                Some(error_trampoline),
                userdata,
                Some(free_callbacks),
            )
        })?;
        *registered = true;
        Ok(())
    }

    // --- Client reset --------------------------------------------------------------------

    /// Performs a client reset that was handed to the host
    /// ([`ClientResetMode::Manual`](crate::ClientResetMode::Manual), or the fallback of
    /// [`RecoverUnsyncedChanges`](crate::ClientResetMode::RecoverUnsyncedChanges) when the
    /// server disables recovery) at once (`ferry_app_handle_client_reset`): the database file
    /// moves to the error's [`client_reset_backup_path`](SyncError::client_reset_backup_path),
    /// where it opens as an ordinary [`Database`] with the device's data (unsynced changes
    /// included), and the next synced open of the path downloads a fresh copy. `token` is the
    /// error's [`client_reset_token`](SyncError::client_reset_token). A reset the host never
    /// performs happens at the file's next open.
    ///
    /// Drop the [`SyncSession`] and every [`Database`] on the file first.
    ///
    /// ```no_run
    /// # use std::sync::mpsc;
    /// # fn f(app: &ferry::App, rx: mpsc::Receiver<ferry::SyncError>,
    /// #      session: ferry::SyncSession, db: ferry::Database) -> ferry::Result<()> {
    /// // The error handler sent the error of a manual reset here.
    /// let error = rx.recv().unwrap();
    /// if let Some(token) = &error.client_reset_token {
    ///     drop((session, db));
    ///     app.handle_client_reset(token)?;
    ///     // error.client_reset_backup_path holds the old file; reopen the synced path.
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// Errors: [`ErrorCode::InvalidArgument`] (the file is still open in this process, or the
    /// token has a NUL byte), [`ErrorCode::NotFound`] (no reset is pending for that token),
    /// [`ErrorCode::Io`].
    pub fn handle_client_reset(&self, token: &str) -> Result<()> {
        let token = c_string(token.as_bytes(), "client reset token")?;
        // SAFETY: a valid handle and a NUL-terminated string that outlives the call.
        Error::check(unsafe { sys::ferry_app_handle_client_reset(self.ptr(), token.as_ptr()) })
    }

    // --- Synced databases ----------------------------------------------------------------

    /// Opens the flexible-sync database of a logged-in user of this App at `path` (created if
    /// missing; it opens at once, offline too) and starts its sync session
    /// (`ferry_sync_open`). Nothing syncs down until the subscription set has a subscription:
    /// see [`SyncSession::update_subscriptions`], or open with
    /// [`SyncOptions::initial_subscriptions`] through [`open_synced_with`](App::open_synced_with).
    ///
    /// The [`Database`] is an ordinary handle ([`Delivery::Loop`]; integrated downloads fire
    /// its notifications); the [`SyncSession`] drives sync and keeps this App alive.
    ///
    /// Errors: [`ErrorCode::InvalidArgument`] (a user of another App), [`ErrorCode::Auth`]
    /// (a logged-out user), [`ErrorCode::MultipleSyncAgents`], the errors of
    /// [`Database::open`].
    pub fn open_synced(
        &self,
        user: &User,
        path: impl AsRef<Path>,
        schema: &Schema,
    ) -> Result<(SyncSession, Database)> {
        self.open_now(user, &SyncOptions::new(path, schema))
    }

    /// Opens a synced database with [`SyncOptions`] and waits for it. With
    /// [`DownloadBeforeOpen::Never`](crate::DownloadBeforeOpen::Never) it opens at once
    /// (`ferry_sync_open`, offline too); otherwise it waits up to `timeout` for
    /// [`open_async`](App::open_async) to have the subscriptions complete and everything the
    /// server has downloaded ([`ErrorCode::Timeout`] also when the options' open timeout runs
    /// out first; a session that opens after `timeout` is closed).
    ///
    /// Errors: those of [`open_synced`](App::open_synced), [`ErrorCode::Timeout`],
    /// [`ErrorCode::Sync`] (the server rejected the subscriptions), the error of a failed
    /// edit (or a panic) in the initial subscriptions closure.
    pub fn open_synced_with(
        &self,
        user: &User,
        options: &SyncOptions<'_>,
        timeout: Duration,
    ) -> Result<(SyncSession, Database)> {
        if !options.waits_for_server() {
            return self.open_now(user, options);
        }
        block_on("open a synced database", timeout, |done| {
            self.open_async(user, options, move |r| done.complete(r))
        })
    }

    /// Opens a synced database with any [`SyncOptions`] (`ferry_sync_open_async`) and returns
    /// at once; `callback` gets the session and database (or the failure) on Ferry's loop
    /// thread, exactly once, unless this call fails (then it is dropped uncalled). For
    /// `Always` (or `Once` at the file's first open) that is after the subscriptions are
    /// complete and everything the server has is downloaded, or [`ErrorCode::Timeout`] after
    /// the options' open timeout. The initial subscriptions closure runs on this thread,
    /// before this call returns.
    pub fn open_async<F>(&self, user: &User, options: &SyncOptions<'_>, callback: F) -> Result<()>
    where
        F: FnOnce(Result<(SyncSession, Database)>) + Send + 'static,
    {
        self.check_user(user)?;
        let failed_edit = Arc::new(Mutex::new(None::<Error>));
        let slot = Arc::clone(&failed_edit);
        let app = Arc::clone(&self.inner);
        // libferry may call the reset closures before the open completes (a reset during the
        // download before open): the completion holds them until the session does.
        let reset_callbacks = options.reset_callbacks();
        let complete = move |result: Result<completion::Opened>| {
            let result = result
                .map_err(|e| {
                    slot.lock().unwrap_or_else(PoisonError::into_inner).take().unwrap_or(e)
                })
                .map(|(session, db)| {
                    (
                        SyncSession::from_raw(session, app, reset_callbacks),
                        Database::from_handle(db, Delivery::Loop),
                    )
                });
            callback(result)
        };
        options.with_raw(&failed_edit, |raw| {
            start_open(complete, |cb, userdata| {
                // SAFETY: valid handles; the options' strings and schema outlive the call.
                unsafe { sys::ferry_sync_open_async(user.as_ptr(), raw, cb, userdata) }
            })
        })?
    }

    fn check_user(&self, user: &User) -> Result<()> {
        if !Weak::ptr_eq(&user.app, &Arc::downgrade(&self.inner)) {
            return Err(Error::new(ErrorCode::InvalidArgument, "the user belongs to another App"));
        }
        Ok(())
    }

    /// `ferry_sync_open` (download before open: never).
    fn open_now(&self, user: &User, options: &SyncOptions<'_>) -> Result<(SyncSession, Database)> {
        self.check_user(user)?;
        let failed_edit = Arc::new(Mutex::new(None::<Error>));
        let mut session = ptr::null_mut();
        let mut db = ptr::null_mut();
        let rc = options.with_raw(&failed_edit, |raw| {
            // SAFETY: valid handles and out-parameters; the options outlive the call.
            unsafe { sys::ferry_sync_open(&mut session, &mut db, user.as_ptr(), raw) }
        })?;
        if rc != sys::FERRY_OK {
            let error = Error::from_last(rc);
            let edit = failed_edit.lock().unwrap_or_else(PoisonError::into_inner).take();
            return Err(edit.unwrap_or(error));
        }
        match (NonNull::new(session), NonNull::new(db)) {
            (Some(session), Some(db)) => Ok((
                SyncSession::from_raw(session, Arc::clone(&self.inner), options.reset_callbacks()),
                Database::from_handle(db, Delivery::Loop),
            )),
            _ => {
                completion::free_opened(session, db);
                Err(Error::new(ErrorCode::Internal, "ferry_sync_open succeeded but returned NULL"))
            }
        }
    }
}
