//! Databases, transactions, objects and query results.

use std::collections::HashMap;
use std::ffi::CString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::thread::{self, ThreadId};

use crate::error::{Error, ErrorCode, Result};
use crate::notify::{self, ChangeSet, NotificationToken};
use crate::receipt::{start_receipt_sync, Receipt, ReceiptState};
use crate::schema::{string_from, Property, Schema};
use crate::sys;
use crate::value::{raw_values, Value};

/// Where notification callbacks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delivery {
    /// On Ferry's event-loop thread, as soon as possible after the commit (the default). The
    /// callbacks of a [`Database`] opened this way must be `Send`, which the observe functions
    /// require anyway.
    #[default]
    Loop,
    /// Only inside [`Database::deliver_notifications`], on the thread that calls it;
    /// [`Database::notification_fd`] becomes readable when there is something to deliver.
    Poll,
}

#[derive(Debug, Clone)]
enum Location {
    Path(PathBuf),
    InMemory(String),
}

/// How to open a [`Database`]: a file path or an in-memory identifier, plus a schema, the
/// notification [`Delivery`] and the synced mark.
///
/// ```no_run
/// # use ferry::{Delivery, Options, Schema};
/// # fn f(schema: &Schema) {
/// let file = Options::path("/tmp/items.ferry").schema(schema);
/// let memory = Options::in_memory("scratch").schema(schema).delivery(Delivery::Poll);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Options<'a> {
    location: Location,
    schema: Option<&'a Schema>,
    delivery: Delivery,
    synced: bool,
    encryption_key: Option<KeyRef<'a>>,
}

/// An encryption key lent to [`Options`]; its `Debug` never shows the bytes.
#[derive(Clone, Copy)]
struct KeyRef<'a>(&'a [u8; sys::FERRY_ENCRYPTION_KEY_SIZE]);

impl fmt::Debug for KeyRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<64-byte encryption key>")
    }
}

impl<'a> Options<'a> {
    /// A file database at `path` (created if missing; its directory must exist).
    pub fn path(path: impl AsRef<Path>) -> Options<'a> {
        Options::at(Location::Path(path.as_ref().to_path_buf()))
    }

    /// An in-memory database: nothing touches the disk, every handle opened with the same
    /// identifier in this process shares it, and it is dropped when the last handle closes.
    pub fn in_memory(identifier: impl Into<String>) -> Options<'a> {
        Options::at(Location::InMemory(identifier.into()))
    }

    fn at(location: Location) -> Options<'a> {
        Options {
            location,
            schema: None,
            delivery: Delivery::Loop,
            synced: false,
            encryption_key: None,
        }
    }

    /// The schema to open with. Without one, the schema stored in the file is used (an error
    /// for a new database). Additive changes migrate the file; breaking ones fail with
    /// [`ErrorCode::SchemaMismatch`].
    pub fn schema(mut self, schema: &'a Schema) -> Options<'a> {
        self.schema = Some(schema);
        self
    }

    /// Where notification callbacks run (default [`Delivery::Loop`]).
    pub fn delivery(mut self, delivery: Delivery) -> Options<'a> {
        self.delivery = delivery;
        self
    }

    /// Marks the file as synced: the first process that opens it is its one sync agent, and
    /// other processes get [`ErrorCode::MultipleSyncAgents`] while it has it open. Not allowed
    /// for in-memory databases.
    pub fn synced(mut self, synced: bool) -> Options<'a> {
        self.synced = synced;
        self
    }

    /// Encrypts the file with this 64-byte key: a new file is created encrypted, an existing
    /// one must have been encrypted with it. Every page of the file and of its WAL is
    /// encrypted and authenticated (AES-256-GCM). A wrong key, or a key for an unencrypted
    /// file, fails with [`ErrorCode::Decrypt`]. libferry copies the key during the open. Not
    /// allowed for in-memory databases.
    pub fn encryption_key(mut self, key: &'a [u8; 64]) -> Options<'a> {
        self.encryption_key = Some(KeyRef(key));
        self
    }
}

/// A class's key and property descriptions, cached by name (they stay the same for as long
/// as the handle is open).
#[derive(Debug)]
pub(crate) struct ClassMeta {
    pub(crate) key: sys::ferry_class_key_t,
    pub(crate) name: String,
    pub(crate) properties: Vec<Property>,
    by_name: HashMap<String, sys::ferry_property_key_t>,
}

impl ClassMeta {
    /// The name of the property with this key (for change sets).
    pub(crate) fn property_name(&self, key: sys::ferry_property_key_t) -> String {
        match self.properties.get(key as usize) {
            Some(p) => p.name().to_owned(),
            None => format!("#{key}"),
        }
    }
}

/// The raw handle, freed when the last owner ([`Database`] or a [`NotificationToken`]) goes,
/// unless libferry lent it to a callback (`lent`: then it is libferry's, and never freed here).
#[derive(Debug)]
pub(crate) struct Handle {
    raw: NonNull<sys::ferry_db_t>,
    lent: bool,
}

// SAFETY: libferry handles may be used from any thread; calls on them are serialised.
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

impl Handle {
    pub(crate) fn ptr(&self) -> *mut sys::ferry_db_t {
        self.raw.as_ptr()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.lent {
            // Lent: libferry closes it after the callback (and may reuse its address since).
            return;
        }
        // SAFETY: we own the handle and this is its last use.
        unsafe { sys::ferry_db_free(self.raw.as_ptr()) }
    }
}

/// An open Ferry database handle.
///
/// Every method may be called from any thread (`Database` is `Send + Sync`): libferry
/// serialises calls on one handle. Writes are methods of a [`Transaction`], opened with
/// [`write`](Database::write) or [`begin_write`](Database::begin_write); threads sharing a
/// `Database` take turns with their transactions. Reads through a handle see its open
/// transaction's uncommitted writes, whichever thread reads; other handles see the last commit.
/// Classes and properties are named by their names; their keys are looked up once and cached.
///
/// Dropping the `Database` closes the handle (cancelling an open transaction and stopping its
/// notifications); the memory is released once its [`NotificationToken`]s are dropped too.
pub struct Database {
    handle: Arc<Handle>,
    delivery: Delivery,
    classes: RwLock<HashMap<String, Arc<ClassMeta>>>,
    tx_lock: TxLock,
}

impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Database")
            .field("handle", &self.handle.ptr())
            .field("delivery", &self.delivery)
            .finish()
    }
}

impl Database {
    /// Opens a database (`ferry_db_open`). Handles opened on the same path (or in-memory
    /// identifier) in one process share one store.
    ///
    /// Errors: [`ErrorCode::InvalidArgument`], [`ErrorCode::Io`], [`ErrorCode::Corrupt`],
    /// [`ErrorCode::SchemaMismatch`], [`ErrorCode::MultipleSyncAgents`],
    /// [`ErrorCode::InvalidSchema`] (no schema for a new database), [`ErrorCode::Decrypt`]
    /// (a wrong or missing key).
    pub fn open(options: &Options<'_>) -> Result<Database> {
        let mut raw = sys::ferry_db_options_t {
            version: 0,
            path: ptr::null(),
            in_memory_identifier: ptr::null(),
            schema: ptr::null(),
            delivery: sys::FERRY_DELIVERY_LOOP,
            synced: false,
            encryption_key: ptr::null(),
        };
        // SAFETY: `raw` is a valid out-parameter.
        Error::check(unsafe {
            sys::ferry_db_options_init(&mut raw, sys::FERRY_DB_OPTIONS_VERSION)
        })?;

        let location = match &options.location {
            Location::Path(p) => c_string(p.as_os_str().as_bytes(), "path")?,
            Location::InMemory(id) => c_string(id.as_bytes(), "in-memory identifier")?,
        };
        match options.location {
            Location::Path(_) => raw.path = location.as_ptr(),
            Location::InMemory(_) => raw.in_memory_identifier = location.as_ptr(),
        }
        raw.schema = options.schema.map_or(ptr::null(), Schema::as_ptr);
        raw.delivery = match options.delivery {
            Delivery::Loop => sys::FERRY_DELIVERY_LOOP,
            Delivery::Poll => sys::FERRY_DELIVERY_POLL,
        };
        raw.synced = options.synced;
        raw.encryption_key = options.encryption_key.map_or(ptr::null(), |k| k.0.as_ptr());

        let mut out = ptr::null_mut();
        // SAFETY: `raw`'s strings and schema outlive the call; libferry copies them.
        Error::check(unsafe { sys::ferry_db_open(&mut out, &raw) })?;
        let handle = NonNull::new(out).ok_or_else(|| {
            Error::new(ErrorCode::Internal, "ferry_db_open succeeded but returned NULL")
        })?;
        Ok(Database::from_handle(handle, options.delivery))
    }

    /// Encrypts (`old_key` `None`), decrypts (`new_key` `None`) or re-keys the database file
    /// at `path`, which no process may have open (`ferry_db_change_key`). The file is
    /// rewritten beside itself and moved over the original once complete.
    ///
    /// Errors: [`ErrorCode::InvalidArgument`] (a missing file, or one open in this process),
    /// [`ErrorCode::Decrypt`] (`old_key` does not open it), [`ErrorCode::Corrupt`],
    /// [`ErrorCode::Busy`], [`ErrorCode::Io`].
    pub fn change_key(
        path: impl AsRef<Path>,
        old_key: Option<&[u8; 64]>,
        new_key: Option<&[u8; 64]>,
    ) -> Result<()> {
        let path = c_string(path.as_ref().as_os_str().as_bytes(), "path")?;
        let old = old_key.map_or(ptr::null(), |k| k.as_ptr());
        let new = new_key.map_or(ptr::null(), |k| k.as_ptr());
        // SAFETY: the path and the keys (64 bytes each) outlive the call; libferry copies them.
        Error::check(unsafe { sys::ferry_db_change_key(path.as_ptr(), old, new) })
    }

    /// Wraps a handle the caller owns (from `ferry_db_open` or `ferry_sync_open`); the
    /// `Database` closes and frees it.
    pub(crate) fn from_handle(handle: NonNull<sys::ferry_db_t>, delivery: Delivery) -> Database {
        Database {
            handle: Arc::new(Handle { raw: handle, lent: false }),
            delivery,
            classes: RwLock::new(HashMap::new()),
            tx_lock: TxLock::default(),
        }
    }

    /// Wraps a handle libferry lends to a callback (the client reset's before and after
    /// databases): dropping the `Database` neither closes nor frees it.
    ///
    /// # Safety
    /// The handle must stay valid while the `Database` is used, and the `Database` must be
    /// handed out only by reference for the duration of the callback. (A notification token
    /// registered through it may outlive it: the token never frees a lent handle.)
    pub(crate) unsafe fn lent(handle: NonNull<sys::ferry_db_t>) -> Database {
        Database {
            handle: Arc::new(Handle { raw: handle, lent: true }),
            delivery: Delivery::Loop,
            classes: RwLock::new(HashMap::new()),
            tx_lock: TxLock::default(),
        }
    }

    /// The raw handle, for calling `sys` functions directly. It stays valid while `self` lives.
    pub fn as_ptr(&self) -> *mut sys::ferry_db_t {
        self.handle.ptr()
    }

    fn ptr(&self) -> *mut sys::ferry_db_t {
        self.handle.ptr()
    }

    /// Closes the handle: an open write transaction is cancelled, notifications stop, and
    /// every later call fails with [`ErrorCode::Closed`]. Closing twice is allowed. Dropping
    /// the `Database` closes it too. A database lent to a client reset closure cannot be
    /// closed ([`ErrorCode::InvalidArgument`]): libferry closes it after the call.
    pub fn close(&self) -> Result<()> {
        // SAFETY: a valid handle.
        Error::check(unsafe { sys::ferry_db_close(self.ptr()) })
    }

    /// Whether the handle was closed.
    pub fn is_closed(&self) -> Result<bool> {
        let mut out = false;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_db_is_closed(&mut out, self.ptr()) })?;
        Ok(out)
    }

    /// How this handle delivers notifications.
    pub fn delivery(&self) -> Delivery {
        self.delivery
    }

    /// Whether this is a handle libferry lent to a client reset closure
    /// ([`SyncOptions::before_reset`](crate::SyncOptions::before_reset),
    /// [`after_reset`](crate::SyncOptions::after_reset)): usable during the call only.
    pub fn is_lent(&self) -> bool {
        self.handle.lent
    }

    /// Writes a consistent copy of the whole database (data, schema, and for a synced
    /// database its sync state and unsynced changes) to a new file at `path`
    /// (`ferry_db_write_copy`), for example to keep the database as it was before a client
    /// reset: call it on the `before` database a
    /// [`before_reset`](crate::SyncOptions::before_reset) closure gets. The copy opens with
    /// [`Database::open`] without a schema (the file's own). To hand a synced database to
    /// another user, use [`SyncSession::write_copy`](crate::SyncSession::write_copy) instead.
    ///
    /// ```
    /// # use ferry::{ClassSchema, Database, Options, Property, PropertyType, Schema, Value};
    /// # fn main() -> ferry::Result<()> {
    /// # let dir = std::env::temp_dir().join(format!("ferry-doc-write-copy-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let schema = Schema::new([ClassSchema::new("Person")
    ///     .property(Property::primary_key(PropertyType::String))
    ///     .property(Property::new("age", PropertyType::Int))])?;
    /// let db = Database::open(&Options::path(dir.join("people.ferry")).schema(&schema))?;
    /// db.write(|tx| tx.create("Person", &[("_id", "ana".into()), ("age", 41.into())]))?;
    ///
    /// db.write_copy(dir.join("copy.ferry"))?;
    /// let copy = Database::open(&Options::path(dir.join("copy.ferry")))?; // the file's schema
    /// assert_eq!(copy.get("Person", "ana")?.unwrap().get("age")?, Value::Int(41));
    /// # drop((db, copy));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok(()) }
    /// ```
    ///
    /// Errors: [`ErrorCode::InvalidArgument`] (an empty or existing path),
    /// [`ErrorCode::Closed`], [`ErrorCode::Io`].
    pub fn write_copy(&self, path: impl AsRef<Path>) -> Result<()> {
        let c = c_string(path.as_ref().as_os_str().as_bytes(), "path")?;
        // SAFETY: a valid handle and a NUL-terminated path that outlives the call.
        Error::check(unsafe { sys::ferry_db_write_copy(self.ptr(), c.as_ptr()) })
    }

    // --- Schema ---------------------------------------------------------------------------

    /// The names of the classes in the database's schema, in key order.
    pub fn class_names(&self) -> Result<Vec<String>> {
        let mut count = 0usize;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_db_class_count(&mut count, self.ptr()) })?;
        (0..count)
            .map(|key| {
                let info = self.class_info(key as sys::ferry_class_key_t)?;
                // SAFETY: the name is lent for as long as the handle lives.
                Ok(unsafe { string_from(info.name) }.unwrap_or_default())
            })
            .collect()
    }

    /// The properties of a class, in key order.
    pub fn properties(&self, class: &str) -> Result<Vec<Property>> {
        Ok(self.class(class)?.properties.clone())
    }

    fn class_info(&self, key: sys::ferry_class_key_t) -> Result<sys::ferry_class_info_t> {
        let mut info = sys::ferry_class_info_t {
            name: ptr::null(),
            properties: ptr::null(),
            property_count: 0,
            flags: 0,
        };
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_db_get_class(&mut info, self.ptr(), key) })?;
        Ok(info)
    }

    /// The cached description of a class, looked up on first use.
    pub(crate) fn class(&self, name: &str) -> Result<Arc<ClassMeta>> {
        if let Some(meta) = self.classes.read().unwrap_or_else(|e| e.into_inner()).get(name) {
            return Ok(Arc::clone(meta));
        }
        let cname = c_string(name.as_bytes(), "class name")?;
        let mut key = 0;
        // SAFETY: valid handle, out-parameter and string.
        Error::check(unsafe { sys::ferry_db_find_class(&mut key, self.ptr(), cname.as_ptr()) })?;
        let info = self.class_info(key)?;
        let mut properties = Vec::with_capacity(info.property_count);
        let mut by_name = HashMap::with_capacity(info.property_count);
        for pkey in 0..info.property_count as sys::ferry_property_key_t {
            let mut raw = sys::ferry_property_info_t {
                name: ptr::null(),
                type_: 0,
                flags: 0,
                link_target: ptr::null(),
            };
            // SAFETY: valid handle and out-parameter.
            Error::check(unsafe { sys::ferry_db_get_property(&mut raw, self.ptr(), key, pkey) })?;
            // SAFETY: the strings are lent for as long as the handle lives; copied here.
            let property = unsafe { Property::from_raw(&raw) }?;
            by_name.insert(property.name().to_owned(), pkey);
            properties.push(property);
        }
        let meta = Arc::new(ClassMeta { key, name: name.to_owned(), properties, by_name });
        self.classes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_owned(), Arc::clone(&meta));
        Ok(meta)
    }

    /// The key of a property of a cached class.
    fn property(&self, class: &ClassMeta, name: &str) -> Result<sys::ferry_property_key_t> {
        if let Some(&key) = class.by_name.get(name) {
            return Ok(key);
        }
        // Not in the class: let libferry say so, in its own words.
        let cname = c_string(name.as_bytes(), "property name")?;
        let mut key = 0;
        // SAFETY: valid handle, out-parameter and string.
        Error::check(unsafe {
            sys::ferry_db_find_property(&mut key, self.ptr(), class.key, cname.as_ptr())
        })?;
        Ok(key)
    }

    // --- Transactions ---------------------------------------------------------------------

    /// Runs `f` in a write transaction: commits if it returns `Ok`, cancels if it returns
    /// `Err` (or panics), and returns what `f` returned.
    ///
    /// ```no_run
    /// # fn f(db: &ferry::Database) -> ferry::Result<()> {
    /// db.write(|tx| {
    ///     tx.create("Item", &[("_id", ferry::ObjectId::generate().into()), ("complexity", 3.into())])
    /// })?;
    /// # Ok(()) }
    /// ```
    ///
    /// Errors: those of `f`, of [`begin_write`](Database::begin_write) and of
    /// [`Transaction::commit`].
    pub fn write<R>(&self, f: impl FnOnce(&Transaction<'_>) -> Result<R>) -> Result<R> {
        let tx = self.begin_write()?;
        match f(&tx) {
            Ok(value) => {
                tx.commit()?;
                Ok(value)
            }
            Err(e) => {
                // The closure's error is the one to report; a failing cancel (for example on
                // a handle the closure closed) adds nothing.
                let _ = tx.cancel();
                Err(e)
            }
        }
    }

    /// Begins a write transaction on this handle. It ends with [`Transaction::commit`] or
    /// [`Transaction::cancel`]; dropping the transaction cancels it.
    ///
    /// Only one write transaction runs at a time per file: this waits while another handle
    /// has one, and, since libferry ties a transaction to the handle rather than the thread,
    /// also while another thread has one on this same `Database`.
    ///
    /// Errors: [`ErrorCode::AlreadyInTransaction`] (this thread already has a transaction on
    /// this handle or on another handle of the same file: waiting would deadlock),
    /// [`ErrorCode::Busy`], [`ErrorCode::Closed`].
    pub fn begin_write(&self) -> Result<Transaction<'_>> {
        if !self.tx_lock.acquire() {
            return Err(Error::new(
                ErrorCode::AlreadyInTransaction,
                "this thread already has a write transaction on this handle",
            ));
        }
        // SAFETY: a valid handle.
        if let Err(e) = Error::check(unsafe { sys::ferry_db_begin_write(self.ptr()) }) {
            self.tx_lock.release();
            return Err(e);
        }
        Ok(Transaction { db: self, finished: false })
    }

    /// Whether this handle has a write transaction open.
    pub fn is_in_transaction(&self) -> Result<bool> {
        let mut out = false;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_db_is_in_transaction(&mut out, self.ptr()) })?;
        Ok(out)
    }

    /// Raw property values; their pointers borrow `values`, which must outlive their use.
    fn property_values(
        &self,
        class: &ClassMeta,
        values: &[(&str, Value)],
    ) -> Result<Vec<sys::ferry_property_value_t>> {
        values
            .iter()
            .map(|(name, value)| {
                Ok(sys::ferry_property_value_t {
                    property: self.property(class, name)?,
                    value: value.raw().get(),
                })
            })
            .collect()
    }

    // --- Reading --------------------------------------------------------------------------

    /// A snapshot of the object with this primary key, or `None` if there is none.
    ///
    /// Errors: [`ErrorCode::NoSuchClass`], [`ErrorCode::WrongType`] (a key of the wrong
    /// type), [`ErrorCode::Closed`].
    pub fn get(&self, class: &str, primary_key: impl Into<Value>) -> Result<Option<Object<'_>>> {
        let meta = self.class(class)?;
        let pk = primary_key.into();
        let mut out = ptr::null_mut();
        // SAFETY: valid handle and out-parameter; the raw value borrows `pk`.
        let rc =
            unsafe { sys::ferry_object_get(&mut out, self.ptr(), meta.key, pk.raw().as_ptr()) };
        if rc == sys::FERRY_ERR_NOT_FOUND {
            return Ok(None);
        }
        Error::check(rc)?;
        Ok(Some(Object::new(out, self, meta)?))
    }

    /// Runs a query on one class, with `$0`, `$1`... taken from `args`:
    ///
    /// ```text
    /// complexity <= $0 AND ownerId == $1
    /// name BEGINSWITH[c] "a" OR status IN {"open", "done"}
    /// TRUEPREDICATE SORT(complexity DESC, name ASC) LIMIT(10)
    /// ```
    ///
    /// Errors: [`ErrorCode::Query`] (the message gives the byte offset and what was
    /// expected), [`ErrorCode::NoSuchClass`], [`ErrorCode::Closed`], [`ErrorCode::Io`].
    pub fn query(&self, class: &str, query: &str, args: &[Value]) -> Result<Results<'_>> {
        let meta = self.class(class)?;
        let cquery = c_string(query.as_bytes(), "query")?;
        let raw_args = raw_values(args);
        let mut out = ptr::null_mut();
        // SAFETY: valid handle, out-parameter and string; raw_args borrows `args`.
        Error::check(unsafe {
            sys::ferry_db_query(
                &mut out,
                self.ptr(),
                meta.key,
                cquery.as_ptr(),
                raw_args.as_ptr(),
                raw_args.len(),
            )
        })?;
        Results::new(out, self, meta)
    }

    // --- Notifications --------------------------------------------------------------------

    /// Calls `callback` after commits that change a query's results: objects entering or
    /// leaving them, or objects in them changing. SORT and LIMIT are allowed. Several commits
    /// may be reported in one call. The callback runs on Ferry's loop thread
    /// ([`Delivery::Loop`]) or inside [`deliver_notifications`](Database::deliver_notifications)
    /// ([`Delivery::Poll`]); it should not block, and a panic in it is caught and reported on
    /// stderr. Dropping the returned token unregisters it.
    pub fn observe_query<F>(
        &self,
        class: &str,
        query: &str,
        args: &[Value],
        callback: F,
    ) -> Result<NotificationToken>
    where
        F: FnMut(&ChangeSet) + Send + 'static,
    {
        let meta = self.class(class)?;
        let cquery = c_string(query.as_bytes(), "query")?;
        let raw_args = raw_values(args);
        let key = meta.key;
        notify::register(
            &self.handle,
            meta,
            self.delivery == Delivery::Loop,
            callback,
            |out, cb, userdata, free| {
                // SAFETY: valid handle, out-parameter and string; raw_args borrows `args`.
                unsafe {
                    sys::ferry_db_observe_query(
                        out,
                        self.ptr(),
                        key,
                        cquery.as_ptr(),
                        raw_args.as_ptr(),
                        raw_args.len(),
                        cb,
                        userdata,
                        free,
                    )
                }
            },
        )
    }

    /// Calls `callback` when the object with this primary key changes, is created (reported
    /// as an insert) or is deleted (after which the registration stops). See
    /// [`observe_query`](Database::observe_query) for where the callback runs.
    pub fn observe_object<F>(
        &self,
        class: &str,
        primary_key: impl Into<Value>,
        callback: F,
    ) -> Result<NotificationToken>
    where
        F: FnMut(&ChangeSet) + Send + 'static,
    {
        let meta = self.class(class)?;
        let pk = primary_key.into();
        let key = meta.key;
        notify::register(
            &self.handle,
            meta,
            self.delivery == Delivery::Loop,
            callback,
            |out, cb, userdata, free| {
                // SAFETY: valid handle and out-parameter; the raw value borrows `pk`.
                unsafe {
                    sys::ferry_db_observe_object(
                        out,
                        self.ptr(),
                        key,
                        pk.raw().as_ptr(),
                        cb,
                        userdata,
                        free,
                    )
                }
            },
        )
    }

    /// For [`Delivery::Poll`] databases: a file descriptor, owned by Ferry and valid while the
    /// database lives, that is readable when notifications wait to be delivered. Poll it; do
    /// not read or close it.
    pub fn notification_fd(&self) -> Result<std::os::fd::RawFd> {
        let mut fd = -1;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_db_notification_fd(&mut fd, self.ptr()) })?;
        Ok(fd)
    }

    /// For [`Delivery::Poll`] databases: runs this handle's pending notification callbacks on
    /// the calling thread and returns how many ran.
    pub fn deliver_notifications(&self) -> Result<usize> {
        let mut delivered = 0usize;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_db_deliver_notifications(&mut delivered, self.ptr()) })?;
        Ok(delivered)
    }

    // --- Write receipts -------------------------------------------------------------------

    /// The state of a write receipt of this file (`ferry_db_receipt_state`). Receipts live in
    /// the file: acknowledged ones stay readable, rejected ones are kept (with their
    /// compensating writes) up to the last 1024. Errors: [`ErrorCode::NotFound`] for a receipt
    /// the file never gave (or one that expired), [`ErrorCode::Closed`].
    pub fn receipt_state(&self, receipt: u64) -> Result<ReceiptState> {
        let mut out = 0i32;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_db_receipt_state(&mut out, self.ptr(), receipt) })?;
        Ok(ReceiptState::from_raw(out))
    }

    /// The receipt with, when [`ReceiptState::Rejected`], its compensating writes
    /// (`ferry_db_read_receipt`). Errors as [`receipt_state`](Database::receipt_state).
    pub fn read_receipt(&self, receipt: u64) -> Result<Receipt> {
        let mut slot: Option<Receipt> = None;
        // libferry calls back on this thread before it returns: the closure borrows `slot`.
        start_receipt_sync(&mut slot, |cb, userdata| {
            // SAFETY: a valid handle; the callback runs before the call returns.
            unsafe { sys::ferry_db_read_receipt(self.ptr(), receipt, cb, userdata) }
        })?;
        slot.ok_or_else(|| {
            Error::new(ErrorCode::Internal, "ferry_db_read_receipt succeeded without calling back")
        })
    }

    // --- History --------------------------------------------------------------------------

    /// The number of changesets in the local history (one per committed write transaction
    /// that changed something, until sync uploads and trims them).
    pub fn history_count(&self) -> Result<u64> {
        let mut out = 0u64;
        // SAFETY: valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_db_history_count(&mut out, self.ptr()) })?;
        Ok(out)
    }

    /// Checks that the data and the history agree by replaying the history; fails with
    /// [`ErrorCode::Corrupt`] naming the first difference. Reads the whole database.
    pub fn verify_history(&self) -> Result<()> {
        // SAFETY: a valid handle.
        Error::check(unsafe { sys::ferry_db_verify_history(self.ptr()) })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if self.handle.lent {
            // Lent to a callback: libferry closes it after the call.
            return;
        }
        // Close now, so the store is released and notifications stop even while tokens are
        // alive; `Handle` frees the handle when the last token goes. Errors are ignored: the
        // only one is an invalid handle, which cannot happen here.
        // SAFETY: a valid handle.
        unsafe { sys::ferry_db_close(self.ptr()) };
    }
}

/// A write transaction on a [`Database`], from [`Database::begin_write`] or given to the
/// closure of [`Database::write`]. The writes are its methods; it dereferences to the
/// database for reads (`tx.get(...)`, `tx.query(...)`), which see its uncommitted writes.
/// Dropping it without committing cancels it.
///
/// It may be sent to and committed from another thread.
#[derive(Debug)]
pub struct Transaction<'db> {
    db: &'db Database,
    finished: bool,
}

impl<'db> Transaction<'db> {
    /// Commits: the data and one history changeset are made durable together, then
    /// notifications are scheduled.
    ///
    /// Errors: [`ErrorCode::NotInTransaction`], [`ErrorCode::Io`] (the transaction was rolled
    /// back), [`ErrorCode::Closed`]. The transaction is over either way.
    pub fn commit(mut self) -> Result<()> {
        self.finished = true;
        // SAFETY: a valid handle.
        Error::check(unsafe { sys::ferry_db_commit(self.db.ptr()) })
    }

    /// Commits like [`commit`](Transaction::commit) and returns the transaction's write
    /// receipt (`ferry_db_commit_with_receipt`): follow it with
    /// [`Database::receipt_state`] and
    /// [`SyncSession::wait_for_receipt`](crate::SyncSession::wait_for_receipt). A transaction
    /// that changed nothing has receipt 0, which reads [`ReceiptState::Acknowledged`]. Errors
    /// as `commit`.
    pub fn commit_with_receipt(mut self) -> Result<u64> {
        self.finished = true;
        let mut receipt = 0u64;
        // SAFETY: a valid handle and out-parameter.
        Error::check(unsafe { sys::ferry_db_commit_with_receipt(&mut receipt, self.db.ptr()) })?;
        Ok(receipt)
    }

    /// Cancels, discarding the transaction's changes.
    pub fn cancel(mut self) -> Result<()> {
        self.finished = true;
        // SAFETY: a valid handle.
        Error::check(unsafe { sys::ferry_db_cancel(self.db.ptr()) })
    }

    /// The database.
    pub fn database(&self) -> &'db Database {
        self.db
    }

    // --- Writing --------------------------------------------------------------------------

    /// Creates an object. `values` must include the primary key `_id`; required properties
    /// left out get their type's zero value, optional ones null, lists are empty (fill them
    /// with [`list_insert`](Transaction::list_insert)).
    ///
    /// Errors: [`ErrorCode::NotInTransaction`], [`ErrorCode::NoSuchClass`],
    /// [`ErrorCode::NoSuchProperty`], [`ErrorCode::WrongType`],
    /// [`ErrorCode::DuplicatePrimaryKey`], [`ErrorCode::InvalidArgument`],
    /// [`ErrorCode::Closed`], [`ErrorCode::Io`].
    pub fn create(&self, class: &str, values: &[(&str, Value)]) -> Result<()> {
        let meta = self.db.class(class)?;
        let raw = self.db.property_values(&meta, values)?;
        // SAFETY: `raw` borrows `values`, alive for the call; libferry copies the data.
        Error::check(unsafe {
            sys::ferry_object_create(self.db.ptr(), meta.key, raw.as_ptr(), raw.len())
        })
    }

    /// Creates the object or, if one with the same primary key exists, sets the given
    /// properties on it (recording only the values that differ).
    pub fn upsert(&self, class: &str, values: &[(&str, Value)]) -> Result<()> {
        let meta = self.db.class(class)?;
        let raw = self.db.property_values(&meta, values)?;
        // SAFETY: as in `create`.
        Error::check(unsafe {
            sys::ferry_object_upsert(self.db.ptr(), meta.key, raw.as_ptr(), raw.len())
        })
    }

    /// Puts back what the revert of a compensating write took (SPEC F-NOLOSS), as new local
    /// writes in this transaction that sync like any other: a removed object is created again
    /// with the device's values, changed-back properties get them back, a restored object is
    /// deleted again. `overrides` (not the primary key, not lists) replace or add values
    /// first: fix what the server refused, e.g. `("ownerId", user_id)`.
    ///
    /// Errors: [`ErrorCode::NotFound`] (changed properties of an object that is gone),
    /// [`ErrorCode::InvalidArgument`] (the primary key overridden, overrides for a restored
    /// object), [`ErrorCode::NoSuchProperty`], [`ErrorCode::WrongType`], and the transaction
    /// errors.
    pub fn reapply_reverted(
        &self,
        reverted: &crate::RevertedObject,
        overrides: &[(&str, Value)],
    ) -> Result<()> {
        let meta = self.db.class(&reverted.object_type)?;
        let raw = self.db.property_values(&meta, overrides)?;
        // SAFETY: `raw` borrows `overrides`, alive for the call; the record is our live copy.
        crate::RevertedObject::check(unsafe {
            sys::ferry_db_reapply_reverted(self.db.ptr(), reverted.raw(), raw.as_ptr(), raw.len())
        })
    }

    /// Sets one property (not the primary key, not a list) of an existing object.
    ///
    /// Errors: [`ErrorCode::NotFound`], [`ErrorCode::WrongType`],
    /// [`ErrorCode::InvalidArgument`], and the transaction and schema errors.
    pub fn set(
        &self,
        class: &str,
        primary_key: impl Into<Value>,
        property: &str,
        value: impl Into<Value>,
    ) -> Result<()> {
        let meta = self.db.class(class)?;
        let key = self.db.property(&meta, property)?;
        let (pk, value) = (primary_key.into(), value.into());
        // SAFETY: the raw values borrow `pk` and `value`, alive for the call.
        Error::check(unsafe {
            sys::ferry_object_set(
                self.db.ptr(),
                meta.key,
                pk.raw().as_ptr(),
                key,
                value.raw().as_ptr(),
            )
        })
    }

    /// Adds `delta` to an int property (a counter: concurrent adds sum up under sync). A null
    /// optional counter counts as 0; overflow is [`ErrorCode::OutOfRange`].
    pub fn add_int(
        &self,
        class: &str,
        primary_key: impl Into<Value>,
        property: &str,
        delta: i64,
    ) -> Result<()> {
        let meta = self.db.class(class)?;
        let key = self.db.property(&meta, property)?;
        let pk = primary_key.into();
        // SAFETY: the raw value borrows `pk`, alive for the call.
        Error::check(unsafe {
            sys::ferry_object_add_int(self.db.ptr(), meta.key, pk.raw().as_ptr(), key, delta)
        })
    }

    /// Deletes an object. Errors: [`ErrorCode::NotFound`] and the transaction and schema
    /// errors.
    pub fn delete(&self, class: &str, primary_key: impl Into<Value>) -> Result<()> {
        let meta = self.db.class(class)?;
        let pk = primary_key.into();
        // SAFETY: the raw value borrows `pk`, alive for the call.
        Error::check(unsafe {
            sys::ferry_object_delete(self.db.ptr(), meta.key, pk.raw().as_ptr())
        })
    }

    /// Inserts `value` at `index` of a list property (`index` == length appends).
    /// Errors: [`ErrorCode::OutOfRange`], [`ErrorCode::WrongType`] (also for a property that
    /// is not a list), [`ErrorCode::NotFound`], and the transaction and schema errors.
    pub fn list_insert(
        &self,
        class: &str,
        primary_key: impl Into<Value>,
        property: &str,
        index: usize,
        value: impl Into<Value>,
    ) -> Result<()> {
        let meta = self.db.class(class)?;
        let key = self.db.property(&meta, property)?;
        let (pk, value) = (primary_key.into(), value.into());
        // SAFETY: the raw values borrow `pk` and `value`, alive for the call.
        Error::check(unsafe {
            sys::ferry_list_insert(
                self.db.ptr(),
                meta.key,
                pk.raw().as_ptr(),
                key,
                index,
                value.raw().as_ptr(),
            )
        })
    }

    /// Appends `value` to a list property (reads the list's length, then inserts there).
    pub fn list_push(
        &self,
        class: &str,
        primary_key: impl Into<Value>,
        property: &str,
        value: impl Into<Value>,
    ) -> Result<()> {
        let pk = primary_key.into();
        let len = match self.db.get(class, &pk)? {
            Some(object) => object.get_list(property)?.len(),
            None => {
                return Err(Error::new(
                    ErrorCode::NotFound,
                    format!("no {class} object with primary key {pk:?}"),
                ))
            }
        };
        self.list_insert(class, pk, property, len, value)
    }

    /// Replaces the element at `index` of a list property.
    pub fn list_set(
        &self,
        class: &str,
        primary_key: impl Into<Value>,
        property: &str,
        index: usize,
        value: impl Into<Value>,
    ) -> Result<()> {
        let meta = self.db.class(class)?;
        let key = self.db.property(&meta, property)?;
        let (pk, value) = (primary_key.into(), value.into());
        // SAFETY: the raw values borrow `pk` and `value`, alive for the call.
        Error::check(unsafe {
            sys::ferry_list_set(
                self.db.ptr(),
                meta.key,
                pk.raw().as_ptr(),
                key,
                index,
                value.raw().as_ptr(),
            )
        })
    }

    /// Removes the element at `index` of a list property.
    pub fn list_erase(
        &self,
        class: &str,
        primary_key: impl Into<Value>,
        property: &str,
        index: usize,
    ) -> Result<()> {
        let meta = self.db.class(class)?;
        let key = self.db.property(&meta, property)?;
        let pk = primary_key.into();
        // SAFETY: the raw value borrows `pk`, alive for the call.
        Error::check(unsafe {
            sys::ferry_list_erase(self.db.ptr(), meta.key, pk.raw().as_ptr(), key, index)
        })
    }

    /// Empties a list property.
    pub fn list_clear(
        &self,
        class: &str,
        primary_key: impl Into<Value>,
        property: &str,
    ) -> Result<()> {
        let meta = self.db.class(class)?;
        let key = self.db.property(&meta, property)?;
        let pk = primary_key.into();
        // SAFETY: the raw value borrows `pk`, alive for the call.
        Error::check(unsafe {
            sys::ferry_list_clear(self.db.ptr(), meta.key, pk.raw().as_ptr(), key)
        })
    }
}

impl std::ops::Deref for Transaction<'_> {
    type Target = Database;

    fn deref(&self) -> &Database {
        self.db
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // SAFETY: a valid handle. A failure (closed handle) leaves nothing to cancel.
            unsafe { sys::ferry_db_cancel(self.db.ptr()) };
        }
        // After the commit or cancel: the next transaction on this handle may begin.
        self.db.tx_lock.release();
    }
}

/// Serialises the write transactions of one handle across threads.
///
/// libferry ties a write transaction to the handle, not the thread: a second `begin` on the
/// handle fails with `FERRY_ERR_ALREADY_IN_TRANSACTION` instead of waiting, and a write from
/// any thread lands in the open transaction. The binding makes a shared `Database` behave like
/// separate handles: `begin_write` waits while another thread's [`Transaction`] is open. A
/// nested begin on the same thread fails instead of deadlocking.
#[derive(Debug, Default)]
struct TxLock {
    /// The thread that began the open transaction, if any.
    owner: Mutex<Option<ThreadId>>,
    released: Condvar,
}

impl TxLock {
    /// Waits until no other thread has a transaction open, then takes the lock. Returns false,
    /// without waiting, if the calling thread holds it already.
    fn acquire(&self) -> bool {
        let me = thread::current().id();
        let mut owner = self.owner.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match *owner {
                None => {
                    *owner = Some(me);
                    return true;
                }
                Some(t) if t == me => return false,
                Some(_) => {
                    owner = self.released.wait(owner).unwrap_or_else(PoisonError::into_inner)
                }
            }
        }
    }

    fn release(&self) {
        *self.owner.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.released.notify_one();
    }
}

/// A snapshot of one object's values, taken when it was read.
pub struct Object<'db> {
    raw: NonNull<sys::ferry_object_t>,
    db: &'db Database,
    class: Arc<ClassMeta>,
}

// SAFETY: libferry handles may be used from any thread; calls on them are serialised.
unsafe impl Send for Object<'_> {}
unsafe impl Sync for Object<'_> {}

impl<'db> Object<'db> {
    fn new(
        raw: *mut sys::ferry_object_t,
        db: &'db Database,
        class: Arc<ClassMeta>,
    ) -> Result<Self> {
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(ErrorCode::Internal, "libferry returned a NULL object on success")
        })?;
        Ok(Object { raw, db, class })
    }

    /// The name of the object's class.
    pub fn class_name(&self) -> &str {
        &self.class.name
    }

    /// The primary key (`_id`).
    pub fn primary_key(&self) -> Result<Value> {
        self.get("_id")
    }

    /// One property's value ([`Value::Null`] for a null optional; a link gives its target's
    /// primary key). Errors: [`ErrorCode::NoSuchProperty`], [`ErrorCode::WrongType`] for a
    /// list property (use [`get_list`](Object::get_list)).
    pub fn get(&self, property: &str) -> Result<Value> {
        let key = self.db.property(&self.class, property)?;
        let mut out = sys::ferry_value_t::zeroed();
        // SAFETY: valid object and out-parameter; the lent data is copied before `self` can
        // be dropped.
        unsafe {
            Error::check(sys::ferry_object_get_value(&mut out, self.raw.as_ptr(), key))?;
            Value::from_raw(&out)
        }
    }

    /// A list property's elements. Errors: [`ErrorCode::NoSuchProperty`],
    /// [`ErrorCode::WrongType`] for a property that is not a list.
    pub fn get_list(&self, property: &str) -> Result<Vec<Value>> {
        let key = self.db.property(&self.class, property)?;
        let mut values = ptr::null();
        let mut count = 0usize;
        // SAFETY: valid object and out-parameters; the lent array is copied right away.
        unsafe {
            Error::check(sys::ferry_object_get_list(
                &mut values,
                &mut count,
                self.raw.as_ptr(),
                key,
            ))?;
            Value::from_raw_array(values, count)
        }
    }

    /// Every property's value by name; a list property's elements are listed in order.
    pub fn fields(&self) -> Result<Vec<(String, Field)>> {
        self.class
            .properties
            .iter()
            .map(|p| {
                let field = if p.is_list() {
                    Field::List(self.get_list(p.name())?)
                } else {
                    Field::Value(self.get(p.name())?)
                };
                Ok((p.name().to_owned(), field))
            })
            .collect()
    }

    /// The raw object handle, valid while `self` lives.
    pub fn as_ptr(&self) -> *const sys::ferry_object_t {
        self.raw.as_ptr()
    }
}

/// One property of an [`Object`], as returned by [`Object::fields`].
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    /// A single value.
    Value(Value),
    /// A list property's elements.
    List(Vec<Value>),
}

impl fmt::Debug for Object<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct(&self.class.name);
        match self.fields() {
            Ok(fields) => {
                for (name, field) in &fields {
                    match field {
                        Field::Value(v) => s.field(name, v),
                        Field::List(l) => s.field(name, l),
                    };
                }
            }
            Err(e) => {
                s.field("error", &e);
            }
        }
        s.finish()
    }
}

impl Drop for Object<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the object.
        unsafe { sys::ferry_object_free(self.raw.as_ptr()) }
    }
}

/// The objects that matched a query, with their values, as of the moment it ran.
///
/// ```no_run
/// # fn f(db: &ferry::Database) -> ferry::Result<()> {
/// let results = db.query("Item", "complexity <= $0 SORT(complexity ASC)", &[4.into()])?;
/// println!("{} items", results.len());
/// for item in &results {
///     println!("{:?}", item?.get("complexity")?);
/// }
/// # Ok(()) }
/// ```
pub struct Results<'db> {
    raw: NonNull<sys::ferry_results_t>,
    db: &'db Database,
    class: Arc<ClassMeta>,
    len: usize,
}

// SAFETY: libferry handles may be used from any thread; calls on them are serialised.
unsafe impl Send for Results<'_> {}
unsafe impl Sync for Results<'_> {}

impl<'db> Results<'db> {
    fn new(
        raw: *mut sys::ferry_results_t,
        db: &'db Database,
        class: Arc<ClassMeta>,
    ) -> Result<Self> {
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::new(ErrorCode::Internal, "ferry_db_query succeeded but returned NULL")
        })?;
        // Own it first, so it is freed if counting fails.
        let mut results = Results { raw, db, class, len: 0 };
        let mut len = 0usize;
        // SAFETY: valid results and out-parameter.
        Error::check(unsafe { sys::ferry_results_count(&mut len, results.raw.as_ptr()) })?;
        results.len = len;
        Ok(results)
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no object matched.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The object at `index`, as a new snapshot. Errors: [`ErrorCode::OutOfRange`].
    pub fn get(&self, index: usize) -> Result<Object<'db>> {
        let mut out = ptr::null_mut();
        // SAFETY: valid results and out-parameter.
        Error::check(unsafe { sys::ferry_results_get(&mut out, self.raw.as_ptr(), index) })?;
        Object::new(out, self.db, Arc::clone(&self.class))
    }

    /// The objects in order.
    pub fn iter(&self) -> ResultsIter<'_, 'db> {
        ResultsIter { results: self, next: 0 }
    }

    /// The value of one property of every object, in order.
    pub fn values(&self, property: &str) -> Result<Vec<Value>> {
        self.iter().map(|o| o?.get(property)).collect()
    }
}

impl fmt::Debug for Results<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Results").field("class", &self.class.name).field("len", &self.len).finish()
    }
}

impl Drop for Results<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the results.
        unsafe { sys::ferry_results_free(self.raw.as_ptr()) }
    }
}

/// Iterator over [`Results`], yielding each object (or the error reading it).
#[derive(Debug)]
pub struct ResultsIter<'r, 'db> {
    results: &'r Results<'db>,
    next: usize,
}

impl<'db> Iterator for ResultsIter<'_, 'db> {
    type Item = Result<Object<'db>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.results.len {
            return None;
        }
        let item = self.results.get(self.next);
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.results.len - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for ResultsIter<'_, '_> {}

impl<'r, 'db> IntoIterator for &'r Results<'db> {
    type Item = Result<Object<'db>>;
    type IntoIter = ResultsIter<'r, 'db>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// A C string, or an [`ErrorCode::InvalidArgument`] error for an interior NUL.
pub(crate) fn c_string(bytes: &[u8], what: &str) -> Result<CString> {
    CString::new(bytes).map_err(|_| {
        Error::new(ErrorCode::InvalidArgument, format!("the {what} contains a NUL byte"))
    })
}
