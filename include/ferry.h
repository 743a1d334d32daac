/*
 * ferry.h — the C interface of libferry, Ferry's offline-first device-sync engine.
 *
 * This header is the contract. It is written by hand; the Swift exports in Sources/FerryC
 * implement it with `@c @implementation`, so the compiler rejects an export whose signature
 * differs from the declaration here, and a test compares the symbols the library exports with
 * the functions declared here.
 *
 * Conventions (see docs/c-api.md for the long form):
 *
 *  - Names are ferry_<object>_<verb>. Handles are incomplete structs.
 *  - Every fallible function returns int: FERRY_OK (0) or a negative FERRY_ERR_* code. Codes are
 *    never renumbered. On failure ferry_error_last() describes what went wrong, on the calling
 *    thread. Out-parameters come first; on failure they are left untouched unless documented.
 *  - Ownership: a function that returns a handle through `**out` gives it to the caller, who frees
 *    it with the matching ferry_*_free. Every free function accepts NULL. A pointer returned
 *    through `const T **out` or inside a struct is lent: it stays valid for the lifetime stated
 *    in the function's documentation.
 *  - Strings are UTF-8. Strings and binaries passed in are copied before the call returns.
 *  - Threads: every function may be called from any thread unless its documentation says
 *    otherwise. A handle may be used from several threads; calls on it are serialised.
 *  - Callbacks take `void *userdata` last. A registration takes (callback, userdata,
 *    userdata_free); userdata_free, when not NULL, runs exactly once: when the registration's
 *    token is freed, or before the registering function returns if it fails.
 *  - Handles are validated: a NULL, freed or wrong kind of handle yields FERRY_ERR_INVALID_HANDLE,
 *    never a crash. (A freed handle whose memory was reused for a new handle of the same kind
 *    cannot be told apart; do not use freed handles.)
 */
#ifndef FERRY_H
#define FERRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================================
 * Version
 * ========================================================================================== */

#define FERRY_VERSION_MAJOR 0
#define FERRY_VERSION_MINOR 1
#define FERRY_VERSION_PATCH 0
#define FERRY_VERSION_STRING "0.1.0"

/** The library's version as "MAJOR.MINOR.PATCH" (static storage, never NULL). Any thread. */
const char *ferry_version(void);

/** The library's version as MAJOR * 10000 + MINOR * 100 + PATCH, for bindings that cannot read
 *  the macros. Any thread. */
int ferry_version_number(void);

/* ============================================================================================
 * Errors
 * ========================================================================================== */

typedef enum ferry_error_code {
  FERRY_OK = 0,
  FERRY_ERR_INVALID_ARGUMENT = -1,      /* a NULL pointer, bad option, out-of-range number... */
  FERRY_ERR_INVALID_HANDLE = -2,        /* NULL, freed, or a handle of another kind */
  FERRY_ERR_NO_MEMORY = -3,
  FERRY_ERR_IO = -4,                    /* the file system or SQLite failed */
  FERRY_ERR_CLOSED = -5,                /* the database was closed */
  FERRY_ERR_NOT_IN_TRANSACTION = -6,    /* a write outside a write transaction */
  FERRY_ERR_ALREADY_IN_TRANSACTION = -7,/* a nested begin */
  FERRY_ERR_NO_SUCH_CLASS = -8,
  FERRY_ERR_NO_SUCH_PROPERTY = -9,
  FERRY_ERR_WRONG_TYPE = -10,           /* a value of the wrong type for the property */
  FERRY_ERR_NOT_FOUND = -11,            /* no object with that primary key */
  FERRY_ERR_DUPLICATE_PRIMARY_KEY = -12,
  FERRY_ERR_QUERY = -13,                /* a query that does not parse or does not fit the schema */
  FERRY_ERR_INVALID_SCHEMA = -14,
  FERRY_ERR_SCHEMA_MISMATCH = -15,      /* a breaking change against the schema in the file */
  FERRY_ERR_MULTIPLE_SYNC_AGENTS = -16, /* another process is the sync agent of this file */
  FERRY_ERR_OUT_OF_RANGE = -17,         /* a list or results index past the end */
  FERRY_ERR_CORRUPT = -18,              /* the file is not a Ferry database, or is damaged */
  FERRY_ERR_BUSY = -19,                 /* another process held the file's write lock too long */
  FERRY_ERR_NETWORK = -20,              /* the server could not be reached, or the connection broke */
  FERRY_ERR_AUTH = -21,                 /* the server refused the credentials or the token */
  FERRY_ERR_SYNC = -22,                 /* the sync server reported an error */
  FERRY_ERR_TIMEOUT = -23,              /* the operation did not complete within its timeout */
  FERRY_ERR_WRITE_REJECTED = -24,       /* a strict pre-flight check refused a write transaction
                                           (SPEC F-PRECHECK): it was rolled back */
  FERRY_ERR_DECRYPT = -25,              /* wrong or missing key, or an encrypted page that fails
                                           authentication (see ferry_db_options_t.encryption_key) */
  FERRY_ERR_INTERNAL = -100             /* a bug in Ferry: please report it with the message */
} ferry_error_code_t;

/** The last error on the calling thread. */
typedef struct ferry_error {
  int code;            /* a ferry_error_code_t */
  const char *message; /* never NULL */
} ferry_error_t;

/** The last error that happened on the calling thread. Never NULL: when no call on this thread
 *  has failed yet, code is FERRY_OK. The struct and its message stay valid until the next
 *  failing call on the same thread. Successful calls do not clear it. Any thread. */
const ferry_error_t *ferry_error_last(void);

/** A short static description of an error code (never NULL; unknown codes give
 *  "unknown error"). Any thread. */
const char *ferry_strerror(int code);

/** Releases userdata. */
typedef void (*ferry_free_fn)(void *userdata);

/* ============================================================================================
 * Values
 * ========================================================================================== */

typedef enum ferry_type {
  FERRY_TYPE_NULL = 0,
  FERRY_TYPE_BOOL = 1,
  FERRY_TYPE_INT = 2,
  FERRY_TYPE_DOUBLE = 3,
  FERRY_TYPE_STRING = 4,
  FERRY_TYPE_BINARY = 5,
  FERRY_TYPE_TIMESTAMP = 6,
  FERRY_TYPE_OBJECT_ID = 7,
  FERRY_TYPE_UUID = 8,
  /* Only as a property type: a link holds the primary key of an object of the target class,
     and is read and written as that primary key's value. Links are always nullable (a link
     may point to nothing), with or without FERRY_PROPERTY_OPTIONAL; the target need not
     exist. */
  FERRY_TYPE_LINK = 9
} ferry_type_t;

/** One value of any property type. `type` says which union member is meaningful; an unknown
 *  `type` is FERRY_ERR_WRONG_TYPE wherever a value is passed in.
 *  Strings need not be NUL-terminated (size counts bytes); strings handed out by Ferry are
 *  NUL-terminated as a convenience. Timestamps are seconds since the Unix epoch plus
 *  nanoseconds in [0, 999999999] (for instants before the epoch, seconds is negative and
 *  nanoseconds still counts forward). */
typedef struct ferry_value {
  int32_t type; /* ferry_type_t, never FERRY_TYPE_LINK */
  union {
    bool b;
    int64_t i;
    double d;
    struct { const char *data; size_t size; } string;
    struct { const uint8_t *data; size_t size; } binary;
    struct { int64_t seconds; int32_t nanoseconds; } timestamp;
    uint8_t object_id[12];
    uint8_t uuid[16];
  } u;
} ferry_value_t;

/** Fills *out with a new ObjectId (FERRY_TYPE_OBJECT_ID): 4 bytes of seconds since the epoch
 *  (big-endian), a 3-byte counter within that second (big-endian; each second starts it at a
 *  random value below 2^23), then 5 bytes (40 bits) from the system's CSPRNG, fresh for each
 *  id. Ids made in one process are strictly increasing, on any thread, so inserts append to a
 *  primary key's B-tree; the random 40 bits keep the next id unguessable from one seen (one
 *  chance in 2^40 per guess). If the clock goes back, or more than 2^23 ids are made in one
 *  second, the time prefix stays ahead of the clock until it catches up. Any thread.
 *  Errors: FERRY_ERR_INVALID_ARGUMENT if out is NULL. */
int ferry_object_id_generate(ferry_value_t *out);

/* ============================================================================================
 * Schema
 * ========================================================================================== */

typedef struct ferry_schema ferry_schema_t;

/** A class is named by its index in the database's schema, a property by its index in the
 *  class. Look them up by name with ferry_db_find_class and ferry_db_find_property; they stay
 *  the same for as long as the database handle is open. */
typedef uint32_t ferry_class_key_t;
typedef uint32_t ferry_property_key_t;

typedef enum ferry_property_flags {
  FERRY_PROPERTY_NORMAL = 0,
  FERRY_PROPERTY_OPTIONAL = 1,    /* may hold null */
  FERRY_PROPERTY_PRIMARY_KEY = 2, /* exactly one per class, named "_id", not optional */
  FERRY_PROPERTY_INDEXED = 4,     /* equality and range queries use an index */
  FERRY_PROPERTY_LIST = 8         /* a list of the property type (lists of links included) */
} ferry_property_flags_t;

typedef struct ferry_property_info {
  const char *name;
  int32_t type;        /* ferry_type_t other than FERRY_TYPE_NULL */
  uint32_t flags;      /* ferry_property_flags_t, or-ed */
  const char *link_target; /* the target class name for FERRY_TYPE_LINK, else NULL */
} ferry_property_info_t;

typedef enum ferry_class_flags {
  FERRY_CLASS_NORMAL = 0,
  FERRY_CLASS_ASYMMETRIC = 1 /* ingest-only under sync: uploaded, never downloaded */
} ferry_class_flags_t;

typedef struct ferry_class_info {
  const char *name;
  const ferry_property_info_t *properties;
  size_t property_count;
  uint32_t flags; /* ferry_class_flags_t */
} ferry_class_info_t;

/** Builds a schema from class descriptions (FERRY_ERR_INVALID_ARGUMENT for NULL pointers, a
 *  NULL class or property name included), validating it: unique class and property names
 *  (1 to 63 bytes, no NUL, not starting with "__"), exactly one primary key per class named
 *  "_id" of type ObjectId, string, int or UUID, link targets that exist, no optional lists.
 *  The schema copies everything it needs. On success *out is owned by the caller
 *  (ferry_schema_free). Any thread.
 *  Errors: FERRY_ERR_INVALID_ARGUMENT (NULL pointers), FERRY_ERR_INVALID_SCHEMA (the message
 *  names the class and property). */
int ferry_schema_new(ferry_schema_t **out, const ferry_class_info_t *classes, size_t class_count);

/** Frees a schema. NULL is a no-op. Databases opened with it keep their own copy. */
void ferry_schema_free(ferry_schema_t *schema);

/* ============================================================================================
 * Databases
 * ========================================================================================== */

typedef struct ferry_db ferry_db_t;

typedef enum ferry_delivery {
  /* Notification callbacks run on Ferry's event-loop thread (a libuv loop started with the
     first database that needs it and stopped with the last). */
  FERRY_DELIVERY_LOOP = 0,
  /* Notification callbacks run only inside ferry_db_deliver_notifications, on the thread that
     calls it; ferry_db_notification_fd becomes readable when there is something to deliver. */
  FERRY_DELIVERY_POLL = 1
} ferry_delivery_t;

#define FERRY_DB_OPTIONS_VERSION 2

/* The size of an encryption key (ferry_db_options_t.encryption_key, ferry_db_change_key). */
#define FERRY_ENCRYPTION_KEY_SIZE 64

typedef struct ferry_db_options {
  uint32_t version;                 /* FERRY_DB_OPTIONS_VERSION (1 is accepted too) */
  /* Exactly one of path and in_memory_identifier. A file database lives at path (created if
     missing; its directory must exist). An in-memory database touches no disk; every handle
     opened with the same identifier in this process shares it, and it is dropped when the
     last handle closes. (It lives in SQLite files on /dev/shm, which is memory; they are
     removed on close, and files of processes that died are removed by the next process
     that makes one. Without a writable /dev/shm, SQLite's memdb is used, and then a write
     transaction makes other handles' reads wait for its end, up to 10 seconds.) */
  const char *path;
  const char *in_memory_identifier;
  /* The schema to open with, or NULL to use the schema stored in the file (an error for a new
     database). A new class, a new property (required ones get their type's zero value in
     existing objects), a new or dropped index and a dropped optional property migrate the file.
     A changed type, optionality or primary key, or a dropped required property, is
     FERRY_ERR_SCHEMA_MISMATCH and the file is left unchanged. */
  const ferry_schema_t *schema;
  int32_t delivery;                 /* ferry_delivery_t, default FERRY_DELIVERY_LOOP */
  /* Marks the file as synced and makes this process its sync agent (SPEC F-MULTIPROC): the one
     process that syncs it. While another process is the agent, an open with synced gets
     FERRY_ERR_MULTIPLE_SYNC_AGENTS; an open without it succeeds: that process reads and writes
     the file, its commits are uploaded by the agent, and its notifications fire for the other
     processes' commits and the agent's downloads (seen within about 20 ms). Handles within one
     process share the role. Once set, the mark stays in the file. Not allowed for in-memory
     databases. */
  bool synced;
  /* Version 2. NULL (the default) for an unencrypted file, or FERRY_ENCRYPTION_KEY_SIZE (64)
     bytes: a new file is created encrypted with it, an existing file must have been
     encrypted with it. Every page of the file and of its WAL is encrypted and authenticated
     with AES-256-GCM under a key of the file's own (HKDF-SHA256 of this key with a random
     salt stored in the file; docs/encryption.md), bound to its page number (and in the WAL to
     its frame and the log's generation). Ferry reads the key during ferry_db_open only: it
     derives its keys from it and keeps no copy (the caller may wipe its buffer on return);
     the derived keys are wiped when the last handle on the file closes. A wrong key, a key
     for an unencrypted file or no key for an encrypted one is FERRY_ERR_DECRYPT, and so is a
     page changed, moved or copied from another file when it is read. Files of the old
     encryption format (version 1) still open; ferry_db_change_key(path, key, key) moves them
     to version 2. Every handle on one file in a process must give the same key. Not allowed
     for in-memory databases. */
  const uint8_t *encryption_key;
} ferry_db_options_t;

/** Fills *opts with defaults for the given options version (FERRY_DB_OPTIONS_VERSION).
 *  Errors: FERRY_ERR_INVALID_ARGUMENT (NULL, or a version this library does not know). */
int ferry_db_options_init(ferry_db_options_t *opts, uint32_t version);

/** Opens a database. On success *out is owned by the caller: ferry_db_close ends its use,
 *  ferry_db_free releases it (and closes it if needed). Handles opened on the same path in one
 *  process share one store, so a commit through one is seen by all. Any thread.
 *  Errors: FERRY_ERR_INVALID_ARGUMENT, FERRY_ERR_IO (cannot open or create the file; also
 *  when the process has no file descriptor left, about six per open database, which the
 *  message says), FERRY_ERR_CORRUPT (not a Ferry database), FERRY_ERR_SCHEMA_MISMATCH,
 *  FERRY_ERR_MULTIPLE_SYNC_AGENTS, FERRY_ERR_INVALID_SCHEMA (no schema for a new database). */
int ferry_db_open(ferry_db_t **out, const ferry_db_options_t *opts);

/** Encrypts, decrypts or re-keys the database file at path, which no process may have open:
 *  old_key opens the file as it is (NULL: it is not encrypted), new_key (NULL: not encrypted)
 *  is the key of the result; keys are FERRY_ENCRYPTION_KEY_SIZE bytes, read during the call
 *  only. The file is rewritten beside itself (path + ".ferry-rekey") and moved over the
 *  original once complete, so a failure or a crash leaves the original intact. An encrypted
 *  result is in the current format (version 2) with a new salt, so old_key == new_key moves a
 *  file of the old format to the new one. Any thread. Takes as long as copying the file.
 *  Errors: FERRY_ERR_INVALID_ARGUMENT (NULL path, a missing or empty file, the file open in
 *  this process), FERRY_ERR_DECRYPT (old_key is wrong, or given for an unencrypted file, or
 *  missing for an encrypted one), FERRY_ERR_CORRUPT (not a Ferry database), FERRY_ERR_BUSY
 *  (another process is writing it or has it open), FERRY_ERR_IO. */
int ferry_db_change_key(const char *path, const uint8_t *old_key, const uint8_t *new_key);

/** Closes a database handle: an open write transaction is cancelled, its notification
 *  registrations stop firing (their tokens must still be freed), and later calls on the handle
 *  fail with FERRY_ERR_CLOSED, except ferry_db_free, ferry_db_is_closed, ferry_db_close
 *  (closing twice is allowed) and ferry_db_notification_fd. Objects and results read before
 *  the close stay readable until freed. Any thread, including inside a notification callback.
 *  Errors: FERRY_ERR_INVALID_HANDLE. */
int ferry_db_close(ferry_db_t *db);

/** Closes (if needed) and frees a database handle. NULL is a no-op. Any thread. A handle lent
 *  to a client-reset callback is not the host's: freeing it does nothing (and ferry_db_close
 *  on it fails with FERRY_ERR_INVALID_ARGUMENT). */
void ferry_db_free(ferry_db_t *db);

/** Whether the handle is closed. Errors: FERRY_ERR_INVALID_HANDLE, FERRY_ERR_INVALID_ARGUMENT. */
int ferry_db_is_closed(bool *out, const ferry_db_t *db);

/** Writes a consistent copy of the whole file (data, schema, and for a synced database its
 *  sync state and unsynced changes) to a new file at path, e.g. to keep the database as it
 *  was before a client reset (the before callback's handle). The copy opens with ferry_db_open
 *  (schema NULL: the file's own); to hand a synced database to another user, use
 *  ferry_sync_write_copy instead. Any thread, the reset callbacks included.
 *  Errors: FERRY_ERR_INVALID_HANDLE, FERRY_ERR_INVALID_ARGUMENT (NULL, empty or existing
 *  path), FERRY_ERR_CLOSED, FERRY_ERR_IO. */
int ferry_db_write_copy(ferry_db_t *db, const char *path);

/* --- Schema of an open database ---------------------------------------------------------- */

/** The number of classes in the database's schema. */
int ferry_db_class_count(size_t *out, const ferry_db_t *db);

/** The key of the class with this name. Errors: FERRY_ERR_NO_SUCH_CLASS, FERRY_ERR_CLOSED. */
int ferry_db_find_class(ferry_class_key_t *out, const ferry_db_t *db, const char *name);

/** The class's description; *out's strings are lent for as long as the handle lives. The
 *  properties array is not filled in (properties is NULL): use ferry_db_get_property. */
int ferry_db_get_class(ferry_class_info_t *out, const ferry_db_t *db, ferry_class_key_t cls);

/** The key of the property with this name. Errors: FERRY_ERR_NO_SUCH_CLASS,
 *  FERRY_ERR_NO_SUCH_PROPERTY, FERRY_ERR_CLOSED. */
int ferry_db_find_property(ferry_property_key_t *out, const ferry_db_t *db, ferry_class_key_t cls,
                           const char *name);

/** The property's description; strings lent for as long as the handle lives. */
int ferry_db_get_property(ferry_property_info_t *out, const ferry_db_t *db, ferry_class_key_t cls,
                          ferry_property_key_t property);

/* --- Write transactions ------------------------------------------------------------------ */

/** Begins a write transaction on this handle. Only one write transaction runs at a time per
 *  file: this call waits while another handle in this process, or another process, has one
 *  (another process's lock is waited for up to 10 seconds, then FERRY_ERR_BUSY). A transaction
 *  belongs to the handle, not the thread: any thread may commit or cancel it. Reads through
 *  the same handle see its uncommitted writes; other handles see the last commit.
 *  Errors: FERRY_ERR_ALREADY_IN_TRANSACTION (this handle, or another handle on the calling
 *  thread, already has one: waiting would deadlock), FERRY_ERR_BUSY, FERRY_ERR_CLOSED. */
int ferry_db_begin_write(ferry_db_t *db);

/** Commits the write transaction: the data and one history changeset holding every change of
 *  the transaction are made durable in one SQLite transaction. Then notifications are
 *  scheduled. A transaction with no changes writes no changeset. On a synced file opened with
 *  a pre-flight check (ferry_sync_options_t.precheck_mode) the check runs first and its
 *  callback is called before this returns.
 *  Errors: FERRY_ERR_NOT_IN_TRANSACTION, FERRY_ERR_IO (the transaction was rolled back and is
 *  over), FERRY_ERR_WRITE_REJECTED (a STRICT pre-flight check refused it: rolled back and
 *  over; the message gives the reasons), FERRY_ERR_CLOSED. */
int ferry_db_commit(ferry_db_t *db);

/** Commits like ferry_db_commit and gives the transaction's write receipt in *out_receipt
 *  (may be NULL): an id, unique in the file, that ferry_db_receipt_state and
 *  ferry_sync_wait_for_receipt follow to the server. A transaction with no changes has
 *  nothing to sync: its receipt is 0, which always reads FERRY_RECEIPT_ACKNOWLEDGED. The
 *  receipt costs the commit nothing (it is the history row SQLite numbered anyway); every
 *  commit has one, so ferry_db_commit is this function without the out-parameter. On failure
 *  *out_receipt is untouched. Any thread (the transaction's handle).
 *  Errors: those of ferry_db_commit. */
int ferry_db_commit_with_receipt(uint64_t *out_receipt, ferry_db_t *db);

/** Cancels the write transaction, discarding its changes.
 *  Errors: FERRY_ERR_NOT_IN_TRANSACTION, FERRY_ERR_CLOSED. */
int ferry_db_cancel(ferry_db_t *db);

/** Whether this handle has a write transaction open. */
int ferry_db_is_in_transaction(bool *out, const ferry_db_t *db);

/* --- Writing objects (inside a write transaction) ----------------------------------------- */

/** A property and its value, for creating and upserting. */
typedef struct ferry_property_value {
  ferry_property_key_t property;
  ferry_value_t value;
} ferry_property_value_t;

/** Creates an object. values must include the primary key "_id"; required properties left
 *  out get their type's zero value (0, false, "", empty binary, the epoch, the all-zero
 *  ObjectId or UUID), optional ones null, lists are empty. A list property cannot be given
 *  here: fill it with ferry_list_insert.
 *  Errors: FERRY_ERR_NOT_IN_TRANSACTION, FERRY_ERR_NO_SUCH_CLASS, FERRY_ERR_NO_SUCH_PROPERTY,
 *  FERRY_ERR_WRONG_TYPE, FERRY_ERR_DUPLICATE_PRIMARY_KEY, FERRY_ERR_INVALID_ARGUMENT (no
 *  primary key, a property given twice, a list property), FERRY_ERR_CLOSED, FERRY_ERR_IO. */
int ferry_object_create(ferry_db_t *db, ferry_class_key_t cls, const ferry_property_value_t *values,
                        size_t count);

/** Creates the object, or, if one with the same primary key exists, sets the given properties
 *  on it. Only values that differ from the stored ones are recorded as changes.
 *  Errors: as ferry_object_create, without FERRY_ERR_DUPLICATE_PRIMARY_KEY. */
int ferry_object_upsert(ferry_db_t *db, ferry_class_key_t cls, const ferry_property_value_t *values,
                        size_t count);

/** Sets one property of an existing object (not the primary key, not a list).
 *  Errors: FERRY_ERR_NOT_FOUND, FERRY_ERR_WRONG_TYPE (a value of the wrong type, null for a
 *  required property, or a list property), FERRY_ERR_INVALID_ARGUMENT (the primary key
 *  property, NULL pointers), and the transaction and schema errors above. */
int ferry_object_set(ferry_db_t *db, ferry_class_key_t cls, const ferry_value_t *primary_key,
                     ferry_property_key_t property, const ferry_value_t *value);

/** Adds delta to an int property (a counter: concurrent adds from several devices sum up under
 *  sync). A null optional counter counts as 0. Overflow is FERRY_ERR_OUT_OF_RANGE.
 *  Errors: FERRY_ERR_WRONG_TYPE if the property is not an int, and those of ferry_object_set. */
int ferry_object_add_int(ferry_db_t *db, ferry_class_key_t cls, const ferry_value_t *primary_key,
                         ferry_property_key_t property, int64_t delta);

/** Deletes an object. Errors: FERRY_ERR_NOT_FOUND and the transaction and schema errors. */
int ferry_object_delete(ferry_db_t *db, ferry_class_key_t cls, const ferry_value_t *primary_key);

/** List operations on a list property of an existing object. index counts from 0; insert
 *  accepts index == size (append). Errors: FERRY_ERR_OUT_OF_RANGE, FERRY_ERR_WRONG_TYPE (also
 *  for a property that is not a list), FERRY_ERR_NOT_FOUND and the transaction and schema
 *  errors. */
int ferry_list_insert(ferry_db_t *db, ferry_class_key_t cls, const ferry_value_t *primary_key,
                      ferry_property_key_t property, size_t index, const ferry_value_t *value);
int ferry_list_set(ferry_db_t *db, ferry_class_key_t cls, const ferry_value_t *primary_key,
                   ferry_property_key_t property, size_t index, const ferry_value_t *value);
int ferry_list_erase(ferry_db_t *db, ferry_class_key_t cls, const ferry_value_t *primary_key,
                     ferry_property_key_t property, size_t index);
int ferry_list_clear(ferry_db_t *db, ferry_class_key_t cls, const ferry_value_t *primary_key,
                     ferry_property_key_t property);

/* --- Reading objects ---------------------------------------------------------------------- */

/** A snapshot of one object's values, taken when it was read. */
typedef struct ferry_object ferry_object_t;

/** Reads the object with this primary key. On success *out is owned by the caller
 *  (ferry_object_free). Errors: FERRY_ERR_NOT_FOUND (*out is set to NULL), the schema errors,
 *  FERRY_ERR_WRONG_TYPE (a key of the wrong type), FERRY_ERR_CLOSED. */
int ferry_object_get(ferry_object_t **out, ferry_db_t *db, ferry_class_key_t cls,
                     const ferry_value_t *primary_key);

/** The class of an object snapshot. */
int ferry_object_get_class(ferry_class_key_t *out, const ferry_object_t *object);

/** One property's value (FERRY_TYPE_NULL for a null optional). Strings and binaries in *out
 *  are lent for the object's lifetime. Errors: FERRY_ERR_NO_SUCH_PROPERTY, FERRY_ERR_WRONG_TYPE
 *  for a list property (use ferry_object_get_list). */
int ferry_object_get_value(ferry_value_t *out, const ferry_object_t *object,
                           ferry_property_key_t property);

/** A list property's elements: *out_values points to *out_count values, lent for the object's
 *  lifetime (NULL when empty). Errors: FERRY_ERR_NO_SUCH_PROPERTY, FERRY_ERR_WRONG_TYPE for a
 *  property that is not a list. */
int ferry_object_get_list(const ferry_value_t **out_values, size_t *out_count,
                          const ferry_object_t *object, ferry_property_key_t property);

/** Frees an object snapshot. NULL is a no-op. */
void ferry_object_free(ferry_object_t *object);

/* --- Queries ------------------------------------------------------------------------------ */

/** The objects that matched a query, with their values, as of the moment it ran. */
typedef struct ferry_results ferry_results_t;

/** Runs a query on one class. The language is in the style of Realm Query Language:
 *    complexity <= 4 AND ownerId == $0
 *    name BEGINSWITH[c] "a" OR status IN {"open", "done"}
 *    NOT (tags.@count > 2) AND ANY tags == "x"
 *    TRUEPREDICATE SORT(complexity DESC, name ASC) LIMIT(10)
 *  Operators: == != < <= > >= BEGINSWITH ENDSWITH CONTAINS LIKE (with [c] for case-insensitive),
 *  IN {...}, AND OR NOT, parentheses, TRUEPREDICATE FALSEPREDICATE, nil/null, $0 $1 ...
 *  arguments taken from args. docs/query-language.md has the full grammar. Equality and range
 *  conditions on indexed properties use the index. On success *out is owned by the caller
 *  (ferry_results_free).
 *  Errors: FERRY_ERR_QUERY (the message gives the byte offset and what was expected; also
 *  for $n past arg_count and arguments that do not fit the property), FERRY_ERR_NO_SUCH_CLASS,
 *  FERRY_ERR_INVALID_ARGUMENT (NULL query, args NULL with arg_count > 0, malformed argument
 *  bytes), FERRY_ERR_WRONG_TYPE (an argument with an unknown type tag), FERRY_ERR_CLOSED,
 *  FERRY_ERR_IO. */
int ferry_db_query(ferry_results_t **out, ferry_db_t *db, ferry_class_key_t cls, const char *query,
                   const ferry_value_t *args, size_t arg_count);

/** The number of objects in the results. */
int ferry_results_count(size_t *out, const ferry_results_t *results);

/** The object at index as a new snapshot owned by the caller (ferry_object_free).
 *  Errors: FERRY_ERR_OUT_OF_RANGE. */
int ferry_results_get(ferry_object_t **out, const ferry_results_t *results, size_t index);

/** Frees results. NULL is a no-op. */
void ferry_results_free(ferry_results_t *results);

/* --- Notifications ------------------------------------------------------------------------ */

/** One token type per registry: this one is for change notifications on objects and queries. */
typedef struct ferry_notification_token ferry_notification_token_t;

/** What changed, handed to a change callback; valid for the duration of the callback.
 *  Objects are named by their primary keys. modified_properties is the union of the
 *  properties changed on the modified objects. For an object notification, a deleted object
 *  gives deleted_count 1; a changed one gives modified_count 1 with its changed properties. */
typedef struct ferry_change_set {
  const ferry_value_t *inserted; size_t inserted_count;
  const ferry_value_t *deleted; size_t deleted_count;
  const ferry_value_t *modified; size_t modified_count;
  const ferry_property_key_t *modified_properties; size_t modified_properties_count;
} ferry_change_set_t;

/** Called after commits that change what is observed: for a query, when objects enter or leave
 *  its results or objects in them change; for an object, when it is created (an insert),
 *  changes, or is deleted; the registration goes on after a deletion and reports a re-creation
 *  as an insert. Several commits may be reported in one call, by their net effect (an object
 *  created and deleted between two deliveries is not reported). Runs on Ferry's
 *  loop thread (FERRY_DELIVERY_LOOP) or inside ferry_db_deliver_notifications
 *  (FERRY_DELIVERY_POLL). It may call any Ferry function, including freeing its own token; it
 *  should not block. */
typedef void (*ferry_change_cb)(void *userdata, const ferry_change_set_t *changes);

/** Observes a query's results (same language and arguments as ferry_db_query; SORT and LIMIT
 *  are allowed). On success *out is owned by the caller; freeing it unregisters.
 *  Errors: those of ferry_db_query, FERRY_ERR_INVALID_ARGUMENT (no callback). userdata_free runs
 *  before a failing call returns. */
int ferry_db_observe_query(ferry_notification_token_t **out, ferry_db_t *db, ferry_class_key_t cls,
                           const char *query, const ferry_value_t *args, size_t arg_count,
                           ferry_change_cb callback, void *userdata, ferry_free_fn userdata_free);

/** Observes one object. The object need not exist yet: its creation is reported as an insert.
 *  Errors: as ferry_db_observe_query, FERRY_ERR_WRONG_TYPE for a key of the wrong type. */
int ferry_db_observe_object(ferry_notification_token_t **out, ferry_db_t *db, ferry_class_key_t cls,
                            const ferry_value_t *primary_key, ferry_change_cb callback,
                            void *userdata, ferry_free_fn userdata_free);

/** Unregisters and frees a token; runs userdata_free. When it returns, the callback is not
 *  running on another thread and will not run again (freeing the token from inside its own
 *  callback is allowed). NULL is a no-op. Any thread. */
void ferry_notification_token_free(ferry_notification_token_t *token);

/** For FERRY_DELIVERY_POLL databases: a file descriptor (owned by Ferry, valid until the handle
 *  is freed) that is readable when notifications wait to be delivered. Poll it; do not read
 *  or close it. Errors: FERRY_ERR_INVALID_ARGUMENT for a FERRY_DELIVERY_LOOP database. */
int ferry_db_notification_fd(int *out, const ferry_db_t *db);

/** For FERRY_DELIVERY_POLL databases: runs the pending notification callbacks of this handle
 *  on the calling thread and clears the descriptor's readiness. *out_delivered (may be NULL)
 *  receives the number of callbacks that ran (pending work for a freed token, or with nothing
 *  left to report, runs no callback). Errors: FERRY_ERR_INVALID_ARGUMENT for a
 *  FERRY_DELIVERY_LOOP database, FERRY_ERR_CLOSED. */
int ferry_db_deliver_notifications(size_t *out_delivered, ferry_db_t *db);

/* --- History ------------------------------------------------------------------------------ */

/** The number of changesets in the database's local history (one per committed write
 *  transaction that changed something, until sync uploads and trims them). */
int ferry_db_history_count(uint64_t *out, ferry_db_t *db);

/** Checks that the data and the history agree: replays every changeset of a local database
 *  into an empty in-memory copy of its schema and compares every object. FERRY_OK when they
 *  agree; FERRY_ERR_CORRUPT naming the first difference otherwise; FERRY_ERR_INVALID_ARGUMENT
 *  for a synced database (its data holds downloads that are not in its history). Meant for
 *  tests and repair tools: it reads the whole database. */
int ferry_db_verify_history(ferry_db_t *db);


/* ============================================================================================
 * Sync: Apps, users, synced databases, subscriptions, errors
 *
 * An App talks to one Ferry server (ferry-server) and one app on it. Its network work runs on
 * Ferry's event-loop thread; every completion callback and the sync error handler run on that
 * thread, must not block it for long, and may call any Ferry function except the ones that
 * wait for the loop (ferry_app_free and ferry_sync_session_free: call those from the host's
 * own threads). Handles (app, user, session, subscription set) are owned
 * by the caller and freed with their _free function; NULL is a no-op for every _free.
 * ========================================================================================== */

typedef struct ferry_app ferry_app_t;
typedef struct ferry_user ferry_user_t;
typedef struct ferry_sync_session ferry_sync_session_t;
typedef struct ferry_subscription_set ferry_subscription_set_t;

typedef enum ferry_log_level {
  FERRY_LOG_ALL = 0, FERRY_LOG_TRACE, FERRY_LOG_DEBUG, FERRY_LOG_DETAIL, FERRY_LOG_INFO,
  FERRY_LOG_WARN, FERRY_LOG_ERROR, FERRY_LOG_FATAL, FERRY_LOG_OFF
} ferry_log_level_t;

/** A log line of the App (message lent for the call). Called on the loop thread. */
typedef void (*ferry_log_cb)(void *userdata, int32_t level, const char *message);

/** Completion of an asynchronous call: error is NULL on success, else the failure (lent for
 *  the call). Called exactly once, on the loop thread. */
typedef void (*ferry_status_cb)(void *userdata, const ferry_error_t *error);

#define FERRY_APP_OPTIONS_VERSION 4

/* Version 1 ends at log_userdata, version 2 at reconnect_delay_max_ms, version 3 at
 * encryption_key; a host built against an older version keeps working (the fields after it
 * take their defaults).
 *
 * Zero is the safe value of every security field: a struct filled with zeroes (version, the
 * required strings and the positive timeouts set) verifies certificates and refuses plain
 * http to another machine. Opting out takes an explicit true (version 4's fields). */
typedef struct ferry_app_options {
  uint32_t version;            /* FERRY_APP_OPTIONS_VERSION (1 to 3 are accepted too) */
  const char *app_id;          /* required: the app id of the server's app configuration */
  const char *base_url;        /* required: https://host[:port], or http://host[:port] for a
                                  loopback host (localhost, 127.0.0.0/8, ::1); plain http to
                                  any other host needs allow_insecure_http, else
                                  FERRY_ERR_INVALID_ARGUMENT */
  const char *base_directory;  /* required, must exist: the user cache lives here */
  const char *ca_file;         /* PEM CA bundle for https/wss, trusted besides the system's CAs;
                                  NULL: the system's CAs only */
  bool reserved;               /* ignored. Versions 1 to 3 called this verify_peer; it is not
                                  read any more, so a host built against them always verifies
                                  certificates (skipping needs version 4's insecure_skip_verify).
                                  ferry_app_options_init sets it to true for versions 1 to 3
                                  (what they read: verification on), false for version 4 */
  uint64_t request_timeout_ms; /* default 60000 */
  int32_t log_level;           /* ferry_log_level_t, default FERRY_LOG_INFO */
  ferry_log_cb log_callback;   /* NULL: no logging */
  void *log_userdata;
  /* version 2 */
  bool multiplex_sessions;          /* default true: a user's sessions share one connection
                                       (SPEC F-MUX); false: one connection per session */
  uint64_t read_timeout_ms;         /* default 120000: a connection that receives nothing for
                                       this long is dropped and retried (F-READTIMEOUT) */
  uint64_t ping_interval_ms;        /* default 60000: a quiet connection pings the server */
  uint64_t reconnect_delay_min_ms;  /* default 1000: first retry after a failed connection */
  uint64_t reconnect_delay_max_ms;  /* default 16000: the backoff's cap (F-BACKOFF) */
  /* version 3 */
  const uint8_t *encryption_key;    /* NULL, or FERRY_ENCRYPTION_KEY_SIZE bytes: the user cache
                                       in base_directory (user ids and tokens) is encrypted
                                       like a database file (docs/encryption.md), an unencrypted
                                       cache is encrypted at once (one of the old encryption
                                       format is rewritten in the new); read during the call
                                       only. An encrypted cache without its key is
                                       FERRY_ERR_DECRYPT. */
  /* version 4 */
  bool insecure_skip_verify;        /* default false: https/wss certificates and host names are
                                       verified. true skips the checks, so anyone on the path
                                       can read and change the traffic: for tests only */
  bool allow_insecure_http;         /* default false: an http:// base_url to a host that is not
                                       loopback is refused (logins, tokens and data would cross
                                       the network unencrypted). true allows it */
} ferry_app_options_t;

/** Fills *opts with defaults. Errors: FERRY_ERR_INVALID_ARGUMENT (NULL, unknown version). */
int ferry_app_options_init(ferry_app_options_t *opts, uint32_t version);

/** Creates an App. Users who logged in earlier on this device are loaded from the cache in
 *  base_directory (they survive restarts and are available offline). Any thread.
 *  Errors: FERRY_ERR_INVALID_ARGUMENT (missing or malformed option; a plain http:// base_url
 *  to a host that is not loopback without allow_insecure_http), FERRY_ERR_IO. */
int ferry_app_new(ferry_app_t **out, const ferry_app_options_t *opts);

/** Makes every connection of the App that is waiting to retry try at once, with its backoff
 *  reset (SPEC F-RECONNECT); e.g. when the host learns the network is back. Does nothing for
 *  connections that are connected or connecting (a silent one is dropped by the read timeout,
 *  not by this) or whose sessions stopped on a fatal error. Any thread; returns at once.
 *  Errors: FERRY_ERR_INVALID_HANDLE. */
int ferry_app_reconnect(ferry_app_t *app);

/** Closes the App's connections and frees it. Sessions opened through it stop syncing;
 *  their database handles stay usable locally. Not from the loop thread. */
void ferry_app_free(ferry_app_t *app);

typedef enum ferry_credentials_kind {
  FERRY_CREDENTIALS_ANONYMOUS = 0,
  FERRY_CREDENTIALS_EMAIL_PASSWORD = 1, /* email, password */
  FERRY_CREDENTIALS_JWT = 2,            /* token: a JWT of the host's auth system */
  FERRY_CREDENTIALS_API_KEY = 3         /* token: the API key */
} ferry_credentials_kind_t;

typedef struct ferry_credentials {
  int32_t kind; /* ferry_credentials_kind_t */
  const char *email;
  const char *password;
  const char *token;
} ferry_credentials_t;

/** Login completion: on success user is a new handle owned by the callee (free it with
 *  ferry_user_free) and error is NULL; on failure user is NULL. */
typedef void (*ferry_user_cb)(void *userdata, ferry_user_t *user, const ferry_error_t *error);

/** Logs in with credentials (copied before the call returns). The completion gets
 *  FERRY_ERR_AUTH for refused credentials, and for a login the server throttles (too many
 *  failed logins of the account or from this address; HTTP 429): then the message ends with
 *  "retry after N s", the seconds to wait before trying again. FERRY_ERR_NETWORK when the
 *  server cannot be reached, FERRY_ERR_TIMEOUT. Errors of the call itself:
 *  FERRY_ERR_INVALID_HANDLE, FERRY_ERR_INVALID_ARGUMENT. */
int ferry_app_log_in(ferry_app_t *app, const ferry_credentials_t *credentials, ferry_user_cb callback, void *userdata);

/** Registers an email/password user (log in afterwards). A registration the server throttles
 *  (too many sign-ups from this address; HTTP 429) completes with FERRY_ERR_AUTH and a message
 *  ending with "retry after N s". */
int ferry_app_register_email(ferry_app_t *app, const char *email, const char *password,
                             ferry_status_cb callback, void *userdata);

/** Logs a user out: the server revokes its refresh token (best effort: works offline), its
 *  sessions stop with a fatal error, and it stays cached as logged out. */
int ferry_app_log_out(ferry_app_t *app, ferry_user_t *user, ferry_status_cb callback, void *userdata);

/** The most recently logged-in user still logged in; *out is NULL when there is none
 *  (FERRY_OK). A new handle owned by the caller. */
int ferry_app_current_user(ferry_user_t **out, ferry_app_t *app);

/** The number of cached users, and the one at index (most recent first; a new handle). */
int ferry_app_user_count(size_t *out, ferry_app_t *app);
int ferry_app_get_user(ferry_user_t **out, ferry_app_t *app, size_t index);

typedef enum ferry_user_state {
  FERRY_USER_LOGGED_OUT = 0, FERRY_USER_LOGGED_IN = 1, FERRY_USER_REMOVED = 2
} ferry_user_state_t;

/** The user's id (lent for the handle's lifetime) and state. */
int ferry_user_id(const char **out, const ferry_user_t *user);
int ferry_user_state(int32_t *out, const ferry_user_t *user);
void ferry_user_free(ferry_user_t *user);

/* --- Errors ---------------------------------------------------------------------------- */

typedef enum ferry_sync_action {
  FERRY_SYNC_ACTION_WARNING = 0, FERRY_SYNC_ACTION_TRANSIENT, FERRY_SYNC_ACTION_APPLICATION_BUG,
  FERRY_SYNC_ACTION_PROTOCOL_VIOLATION, FERRY_SYNC_ACTION_DELETE_DATABASE, FERRY_SYNC_ACTION_CLIENT_RESET,
  FERRY_SYNC_ACTION_CLIENT_RESET_NO_RECOVERY, FERRY_SYNC_ACTION_REVERT_TO_PBS, FERRY_SYNC_ACTION_REFRESH_USER,
  FERRY_SYNC_ACTION_REFRESH_LOCATION, FERRY_SYNC_ACTION_LOG_OUT_USER
} ferry_sync_action_t;

/** One object of a write the server rejected and reverted (SPEC F-CWINFO). */
typedef struct ferry_compensating_write {
  const char *object_type;
  ferry_value_t primary_key;
  const char *reason; /* e.g. write to "<pk>" in table "Item" not allowed; object is outside of the current query view */
} ferry_compensating_write_t;

/** A sync error; everything is lent for the handler's call. Code 231 is a compensating write
 *  (is_fatal false, action WARNING); 226 a rejected subscription set. */
typedef struct ferry_sync_error {
  int32_t code;
  const char *message;
  bool is_fatal;        /* the session stopped syncing */
  int32_t action;       /* ferry_sync_action_t */
  const ferry_compensating_write_t *compensating_writes;
  size_t compensating_writes_count;
  /* Fields added for client reset (SPEC F-RESET); a host compiled before them reads the
   * fields above only, which keep their place. */
  const struct ferry_client_reset_report *client_reset_report; /* a finished automatic reset
                                    (the server's code, 208, with is_fatal false): what was
                                    recovered and discarded; NULL otherwise */
  const char *client_reset_backup_path; /* a reset handed to the host (manual mode, or a
                                    fallback): where ferry_app_handle_client_reset (or the next
                                    open) moves the current file; NULL otherwise */
  const char *client_reset_token;   /* the same reset's token for ferry_app_handle_client_reset;
                                    NULL otherwise */
} ferry_sync_error_t;

/** The App's sync error handler. session is lent for the call (do not free it). It runs after
 *  the server's revert has been integrated, so a rejected object is already gone locally;
 *  ferry_sync_error_reverted_object says what the revert took from the device. */
typedef void (*ferry_sync_error_cb)(void *userdata, ferry_sync_session_t *session, const ferry_sync_error_t *error);

/** Sets (or with NULL clears) the App's sync error handler; a previous userdata is freed with
 *  its userdata_free. The userdata is handed over even when the call fails (then it is freed
 *  at once). The handler's session is NULL when the host already freed that session. */
int ferry_app_set_sync_error_handler(ferry_app_t *app, ferry_sync_error_cb callback, void *userdata,
                                     ferry_free_fn userdata_free);

/* --- What a compensating write took (SPEC F-NOLOSS) --------------------------------------- */

/* The seeds' SDK reports a compensating write as object type, primary key and reason, and the
 * device's values and every later local write to the object vanish. Ferry keeps them: for each
 * object of a 231's compensating_writes, ferry_sync_error_reverted_object lends a record of
 * what the revert took, and ferry_db_reapply_reverted puts it back as new local writes (for
 * example with a corrected ownerId). Added after ferry_sync_error_t's fields, as functions, so
 * hosts built before them keep working and the struct keeps its layout. */

/** What the revert did to the device's object. */
typedef enum ferry_revert_kind {
  FERRY_REVERT_REMOVED = 0,  /* the device had the object and the revert erased it (a refused
                                create, or an update that took it out of the user's view):
                                values holds every property but the primary key */
  FERRY_REVERT_CHANGED = 1,  /* the revert set properties back to the server's values: values
                                holds the device's values of those properties */
  FERRY_REVERT_RESTORED = 2  /* the device had deleted the object and the revert brought it
                                back: values is empty */
} ferry_revert_kind_t;

/** The kinds of local writes. */
typedef enum ferry_write_kind {
  FERRY_WRITE_CREATE = 0, FERRY_WRITE_DELETE = 1, FERRY_WRITE_SET = 2, FERRY_WRITE_ADD_INT = 3,
  FERRY_WRITE_LIST_INSERT = 4, FERRY_WRITE_LIST_SET = 5, FERRY_WRITE_LIST_ERASE = 6,
  FERRY_WRITE_LIST_CLEAR = 7
} ferry_write_kind_t;

/** One property's value as the device had it just before the revert. */
typedef struct ferry_reverted_value {
  ferry_property_key_t property; /* its key in the object's class, as ferry_db_find_property */
  const char *name;
  bool is_list;
  ferry_value_t value;           /* not a list: the value; a list: FERRY_TYPE_NULL */
  const ferry_value_t *list;     /* a list: its elements (NULL when empty); else NULL */
  size_t list_count;
} ferry_reverted_value_t;

/** One local write to the object: the revert undid it (the rejected write) or discarded it (a
 *  later write to the object that did not survive the revert). For REMOVED these are every
 *  write but deletes, for RESTORED the deletes, for CHANGED the writes to the properties it set
 *  back (every write to such a list, its elements not told apart). */
typedef struct ferry_local_write {
  uint64_t local_version;  /* the write transaction that made it: local versions count the
                              device's commits that changed something, 1, 2, 3... */
  int32_t kind;            /* ferry_write_kind_t */
  const char *property;    /* the property's name; NULL for CREATE and DELETE */
  ferry_value_t value;     /* SET, LIST_INSERT, LIST_SET: the value; ADD_INT: the delta
                              (FERRY_TYPE_INT); otherwise FERRY_TYPE_NULL */
  size_t index;            /* LIST_INSERT, LIST_SET, LIST_ERASE: the position; otherwise 0 */
} ferry_local_write_t;

/** What the revert of a compensating write took from one object. */
typedef struct ferry_reverted_object {
  const char *object_type;
  ferry_value_t primary_key;
  int32_t revert;                        /* ferry_revert_kind_t */
  const ferry_reverted_value_t *values;  /* the device's values before the revert of the
                                            properties it removed or changed back, in schema
                                            order; NULL when values_count is 0 */
  size_t values_count;
  const ferry_local_write_t *writes;     /* the local writes it undid or discarded, oldest
                                            first; NULL when writes_count is 0 */
  size_t writes_count;
} ferry_reverted_object_t;

/** What the revert of compensating_writes[index] of a 231 error took from the device. *out is
 *  lent for the handler's call (copy it with ferry_reverted_object_copy to keep it), or NULL
 *  when the revert took nothing: the object ends as the device had it (its later local writes
 *  were laid on top again), or the device never had the write to lose. Entries naming the same
 *  object lend the same record. Call it from the error handler, with the error it was given.
 *  Errors: FERRY_ERR_INVALID_ARGUMENT (NULL out, or error is not a sync error lent to a
 *  running handler), FERRY_ERR_OUT_OF_RANGE (index >= compensating_writes_count). */
int ferry_sync_error_reverted_object(const ferry_reverted_object_t **out, const ferry_sync_error_t *error,
                                     size_t index);

/** Copies a record (lent or copied) for use after the handler returns. On success *out is
 *  owned by the caller (ferry_reverted_object_free); everything in it lives until then. Any
 *  thread. Errors: FERRY_ERR_INVALID_ARGUMENT (NULL out, or object is not a record Ferry lent
 *  or copied and has not freed). */
int ferry_reverted_object_copy(ferry_reverted_object_t **out, const ferry_reverted_object_t *object);

/** Frees a copy. NULL, a lent record and a freed copy are no-ops. Any thread. */
void ferry_reverted_object_free(ferry_reverted_object_t *object);

/** Puts back what a revert took, as new local writes that sync like any other: a REMOVED
 *  object is created again with the device's values (given them, if it exists again), CHANGED
 *  properties get the device's values back, a RESTORED object is deleted again. overrides
 *  (properties of the record's class, not the primary key) replace or add values first: fix
 *  what the server refused, e.g. the ownerId, or it is refused again. Joins the handle's open
 *  write transaction, else runs in a write transaction of its own (waiting for another
 *  handle's like ferry_db_begin_write; nothing is written when it fails). object must be a
 *  record Ferry lent (during its handler) or copied. Any thread, the error handler included.
 *  Errors: FERRY_ERR_INVALID_HANDLE, FERRY_ERR_INVALID_ARGUMENT (NULL or unknown object,
 *  overrides NULL with a count, the primary key overridden, overrides for RESTORED),
 *  FERRY_ERR_NOT_FOUND (CHANGED properties of an object that is gone), FERRY_ERR_NO_SUCH_CLASS,
 *  FERRY_ERR_NO_SUCH_PROPERTY, FERRY_ERR_WRONG_TYPE, FERRY_ERR_BUSY, FERRY_ERR_CLOSED,
 *  FERRY_ERR_IO. */
int ferry_db_reapply_reverted(ferry_db_t *db, const ferry_reverted_object_t *object,
                              const ferry_property_value_t *overrides, size_t overrides_count);

/* --- Write receipts (issue 15) --------------------------------------------------------- */

/** Where a write transaction's changes are on their way to the server. The states come in
 *  this order; ACKNOWLEDGED and REJECTED are final. */
typedef enum ferry_receipt_state {
  FERRY_RECEIPT_LOCAL = 0,        /* committed on this device, not sent yet (also: sent before
                                     a restart and not answered; it is sent again) */
  FERRY_RECEIPT_UPLOADED = 1,     /* sent to the server; its answer has not come back yet */
  FERRY_RECEIPT_ACKNOWLEDGED = 2, /* durable on the server and accepted */
  FERRY_RECEIPT_REJECTED = 3      /* the server reverted writes of the transaction (a
                                     compensating write, sync error 231) */
} ferry_receipt_state_t;

/** A receipt's state; lent for the call that hands it out. compensating_writes (REJECTED
 *  only, else NULL and 0) are the objects of this transaction that the server reverted, with
 *  the server's reasons: the entries of the 231 error that name objects the transaction wrote.
 *  The rule: the server answers an upload with its acknowledgement, then a 231 for the writes
 *  it reverted; every transaction of that upload that wrote a named object is REJECTED (its
 *  other writes may have been applied), the others of the upload ACKNOWLEDGED. After a client
 *  reset, a transaction whose changes the reset discarded is REJECTED with the report's entries
 *  (reason "discarded by a client reset: ..."), and a recovered one reads the state of the
 *  changeset that uploads the recovered changes. */
typedef struct ferry_receipt {
  uint64_t receipt;
  int32_t state; /* ferry_receipt_state_t */
  const ferry_compensating_write_t *compensating_writes;
  size_t compensating_writes_count;
} ferry_receipt_t;

/** Called with a receipt's state (receipt non-NULL, error NULL) or the failure of a wait
 *  (receipt NULL, error non-NULL); both lent for the call. */
typedef void (*ferry_receipt_cb)(void *userdata, const ferry_receipt_t *receipt, const ferry_error_t *error);

/** The state of a write receipt of this file (ferry_receipt_state_t). Receipts live in the
 *  file and survive restarts: an acknowledged one stays readable for the file's life at no
 *  cost; a rejected one keeps its compensating writes in a small table of at most 1024
 *  rejected receipts (past that, the oldest ones already read by the host go first, then the
 *  oldest; a receipt at or before the newest dropped one is then FERRY_ERR_NOT_FOUND,
 *  "expired"). UPLOADED and the settling of an answer are known only to the sync agent's
 *  process: another process reads the file alone (LOCAL until the agent integrates the
 *  acknowledgement, then ACKNOWLEDGED, or REJECTED once the agent records a 231, which may
 *  come a moment after the acknowledgement). A database that is not synced keeps its
 *  receipts LOCAL. The first read (or wait) of any receipt asks the session to settle the
 *  answers it holds (a MARK: sessions of hosts that never ask send none), so a receipt read
 *  UPLOADED may read ACKNOWLEDGED a round trip later.
 *  Any thread; does not wait for the loop.
 *  Errors: FERRY_ERR_INVALID_HANDLE, FERRY_ERR_INVALID_ARGUMENT (out_state NULL),
 *  FERRY_ERR_NOT_FOUND (a receipt this file never gave, or expired), FERRY_ERR_CLOSED,
 *  FERRY_ERR_IO, FERRY_ERR_CORRUPT (a damaged receipt row). */
int ferry_db_receipt_state(int32_t *out_state, ferry_db_t *db, uint64_t receipt);

/** Reads a receipt like ferry_db_receipt_state and calls callback once, on the calling thread,
 *  before returning, with its state and (REJECTED) its compensating writes, lent for the call.
 *  When the call fails the callback is not called. Any thread.
 *  Errors: those of ferry_db_receipt_state, FERRY_ERR_INVALID_ARGUMENT (no callback). */
int ferry_db_read_receipt(ferry_db_t *db, uint64_t receipt, ferry_receipt_cb callback, void *userdata);

/* --- Client reset (SPEC F-RESET) ------------------------------------------------------------ */

/** What a session does when the server can no longer sync with the device's file (it sends a
 *  client-reset error: sync terminated and re-enabled, the device offline longer than the
 *  server's client maximum offline days, ...). The automatic modes turn the file into the
 *  server's state while the host keeps its handles open; notifications fire for what changed. */
typedef enum ferry_client_reset_mode {
  FERRY_CLIENT_RESET_RECOVER_UNSYNCED_CHANGES = 0,  /* default: the server's state, then the
                                   device's unsynced changes replayed on it (F-RECOVERY); when
                                   the server disables recovery, or recovery fails, the reset is
                                   handed to the host as in MANUAL */
  FERRY_CLIENT_RESET_RECOVER_OR_DISCARD_UNSYNCED_CHANGES = 1, /* recovers; discards when
                                   recovery is disabled or fails (and at the next attempt after a
                                   failed recovery) */
  FERRY_CLIENT_RESET_DISCARD_UNSYNCED_CHANGES = 2,  /* the server's state; unsynced changes are
                                   dropped (and listed in the report) */
  FERRY_CLIENT_RESET_MANUAL = 3    /* nothing changes: the error handler gets the error with a
                                   backup path and a token (ferry_app_handle_client_reset) */
} ferry_client_reset_mode_t;

typedef enum ferry_client_reset_outcome {
  FERRY_CLIENT_RESET_RECOVERED = 0, /* the device's change is in the database and will sync */
  FERRY_CLIENT_RESET_DISCARDED = 1  /* the device's change is gone; reason says why */
} ferry_client_reset_outcome_t;

/** One object touched by the device's unsynced changes. */
typedef struct ferry_client_reset_entry {
  const char *object_type;
  ferry_value_t primary_key;
  int32_t outcome;     /* ferry_client_reset_outcome_t */
  const char *reason;  /* e.g. "created on this device and not yet synced", "deleted on the
                          server: the device's updates to it are discarded" */
} ferry_client_reset_entry_t;

/** What a reset kept and dropped: one entry per object the unsynced changes touched. Lent for
 *  the callback that receives it. */
typedef struct ferry_client_reset_report {
  bool recovered;                   /* true: the changes were replayed (entries say per object
                                       what survived); false: they were discarded */
  size_t unsynced_changesets;       /* local transactions the server had not acknowledged */
  const ferry_client_reset_entry_t *entries;
  size_t entries_count;
} ferry_client_reset_report_t;

/** Called before an automatic reset changes the file. before is a read-only database handle
 *  on a snapshot of the file as it was (unsynced changes included); it is lent for the call:
 *  read it, copy it with ferry_db_write_copy, do not keep it (ferry_db_free on it does
 *  nothing; it is closed and its snapshot file deleted after the after callback). Called on the
 *  loop thread: do not wait there for sync. */
typedef void (*ferry_client_reset_before_cb)(void *userdata, ferry_db_t *before);

/** Called after an automatic reset: before as in the before callback, after a handle on the
 *  reset database (lent for the call; a write transaction on it is allowed), report what was
 *  recovered or discarded (lent for the call). The error handler then receives the same
 *  report (a non-fatal error with the server's code). Called on the loop thread. */
typedef void (*ferry_client_reset_after_cb)(void *userdata, ferry_db_t *before, ferry_db_t *after,
                                            const ferry_client_reset_report_t *report);

/** Performs a client reset the error handler was handed (client_reset_token of the error) at
 *  once: the file moves to the error's client_reset_backup_path (which opens as an ordinary
 *  Ferry database, with the device's unsynced changes) and the next open downloads a fresh
 *  copy. The session must be freed and every handle on the file closed (or freed) first. A
 *  reset the host never performs happens at the file's next open. Any thread.
 *  Errors: FERRY_ERR_INVALID_HANDLE, FERRY_ERR_INVALID_ARGUMENT (NULL token, the file still
 *  open), FERRY_ERR_NOT_FOUND (no reset pending for that token), FERRY_ERR_IO. */
int ferry_app_handle_client_reset(ferry_app_t *app, const char *token);

/* --- Synced databases ------------------------------------------------------------------- */

#define FERRY_SYNC_OPTIONS_VERSION 5

/** When an open waits for the server (SPEC F-OPEN). */
typedef enum ferry_download_before_open {
  FERRY_DOWNLOAD_BEFORE_OPEN_NEVER = 0,  /* open at once, offline too; sync in the background */
  FERRY_DOWNLOAD_BEFORE_OPEN_ALWAYS = 1, /* download everything first, at every open */
  FERRY_DOWNLOAD_BEFORE_OPEN_ONCE = 2    /* download first at the file's first open only */
} ferry_download_before_open_t;

/** Fills a new database's subscription set (SPEC F-INITSUBS): set is lent for the call; edit
 *  it with the ferry_subscription_set_* functions. Return FERRY_OK to commit it; any other
 *  value fails the open with FERRY_ERR_INVALID_ARGUMENT naming that value. Called on the
 *  opening thread, before the call returns. */
typedef int (*ferry_initial_subscriptions_cb)(void *userdata, ferry_subscription_set_t *set);

/** The pre-flight check of local writes (SPEC F-PRECHECK). At every commit on the synced
 *  file (from any handle of this process), each object the transaction wrote is judged, as
 *  it was before and as the commit leaves it, exactly as the server will judge it: against the
 *  file's latest subscription set and the write rules the server last published to the file
 *  (the user's role with %%user values expanded; kept in the file, so the check works offline
 *  and after a restart). Before any server published rules, only the subscriptions are
 *  checked. The server stays the authority: a write that passed here may still be compensated
 *  (error 231) if the rules changed. */
typedef enum ferry_precheck_mode {
  FERRY_PRECHECK_OFF = 0,    /* default: no check; a commit reads nothing extra */
  FERRY_PRECHECK_WARN = 1,   /* the commit succeeds; the callback gets the would-be compensating
                                writes at once (offline too); the server reverts them later */
  FERRY_PRECHECK_STRICT = 2  /* the commit fails with FERRY_ERR_WRITE_REJECTED (the message lists
                                the reasons), the transaction is rolled back and over; the
                                callback gets the same list */
} ferry_precheck_mode_t;

/** A commit failed the pre-flight check: writes (count of them, each with the seeds' exact
 *  reason, e.g. write to "<pk>" in table "Item" was denied by write filter in role
 *  "owner-read-write") are lent for the call; committed is true in WARN mode (the data is
 *  committed) and false in STRICT mode (rolled back). Called on the committing thread, inside
 *  ferry_db_commit, after the commit or rollback, with no lock of the database held; only
 *  for commits that fail the check. */
typedef void (*ferry_precheck_cb)(void *userdata, const ferry_compensating_write_t *writes, size_t count, bool committed);

/* Version 1 ends at schema, version 2 at rerun_initial_subscriptions, version 3 at
 * after_reset_userdata, version 4 at precheck_userdata; the fields after a host's version take their defaults. */
typedef struct ferry_sync_options {
  uint32_t version;              /* FERRY_SYNC_OPTIONS_VERSION (1 to 4 are accepted too) */
  const char *path;              /* required: the database file (created if missing), or the
                                    identifier of an in-memory database */
  const ferry_schema_t *schema;  /* required */
  /* version 2 */
  int32_t download_before_open;  /* ferry_download_before_open_t, default NEVER; ALWAYS and ONCE
                                    need ferry_sync_open_async */
  uint64_t open_timeout_ms;      /* default 30000: how long a download before open may take */
  bool in_memory;                /* default false: nothing on disk (SPEC F-INMEM); the data is
                                    dropped when the session and every handle are closed */
  ferry_initial_subscriptions_cb initial_subscriptions; /* NULL: none */
  void *initial_subscriptions_userdata;
  bool rerun_initial_subscriptions; /* default false: only when the set was never written */
  /* version 3 */
  int32_t client_reset_mode;     /* ferry_client_reset_mode_t, default RECOVER_UNSYNCED_CHANGES */
  ferry_client_reset_before_cb before_reset; /* NULL: none; automatic modes only */
  void *before_reset_userdata;   /* must stay valid until the session is freed */
  ferry_client_reset_after_cb after_reset;   /* NULL: none; automatic modes only */
  void *after_reset_userdata;    /* must stay valid until the session is freed */
  /* version 4 */
  int32_t precheck_mode;         /* ferry_precheck_mode_t, default OFF (SPEC F-PRECHECK) */
  ferry_precheck_cb precheck_callback; /* NULL: none (STRICT still fails the commit) */
  void *precheck_userdata;       /* must stay valid until the session is freed */
  /* version 5 */
  const uint8_t *encryption_key; /* NULL, or FERRY_ENCRYPTION_KEY_SIZE bytes: the file is
                                    encrypted as with ferry_db_options_t.encryption_key (read
                                    during the open only), and so are a client reset's
                                    snapshots (each under a page key of its own) and backups.
                                    Not with in_memory. */
} ferry_sync_options_t;

int ferry_sync_options_init(ferry_sync_options_t *opts, uint32_t version);

/** Opens a flexible-sync database of a logged-in user (download before open: never; the
 *  database opens at once, offline too, with a user cached from an earlier login) and starts
 *  its sync session; initial subscriptions and in_memory apply. download_before_open other
 *  than NEVER is FERRY_ERR_INVALID_ARGUMENT here: use ferry_sync_open_async. *out_db is an ordinary
 *  database handle (notifications on the loop thread; integrated downloads fire them);
 *  *out_session drives sync. Free both; freeing the session stops syncing.
 *  Nothing syncs down until the subscription set has a subscription (SPEC F-REQSUB).
 *  Several processes (SPEC F-MULTIPROC): when another process is the file's sync agent, the
 *  open succeeds in standby: the session does not connect (connection state DISCONNECTED),
 *  the database reads and writes as usual (the agent uploads its commits; its notifications
 *  fire for the other processes' commits and the agent's downloads), and within about 250 ms
 *  of the agent closing the file, exiting or being killed, one standby session takes the role
 *  and syncs, uploading what is unacknowledged. Waits of a standby session stay pending until
 *  then. Subscription changes are sent by the agent's session only: make them there.
 *  Errors: FERRY_ERR_AUTH (logged-out user), FERRY_ERR_CLOSED (the user's App was freed),
 *  the errors of ferry_db_open. */
int ferry_sync_open(ferry_sync_session_t **out_session, ferry_db_t **out_db, ferry_user_t *user,
                    const ferry_sync_options_t *opts);

/** Open completion: on success session and db are new handles owned by the callee (as from
 *  ferry_sync_open) and error is NULL; on failure both are NULL. Called exactly once, on the
 *  loop thread. */
typedef void (*ferry_sync_open_cb)(void *userdata, ferry_sync_session_t *session, ferry_db_t *db, const ferry_error_t *error);

/** Opens like ferry_sync_open, then, for download_before_open ALWAYS (or ONCE at the file's
 *  first successful open), waits until the subscriptions (initial ones included) are complete
 *  and everything the server has is downloaded. The completion gets FERRY_ERR_TIMEOUT when
 *  that takes longer than open_timeout_ms (e.g. the server is unreachable), FERRY_ERR_SYNC
 *  when the server rejects the subscriptions, or an error of ferry_sync_open. Errors of the
 *  call itself (then the callback is not called): FERRY_ERR_INVALID_HANDLE,
 *  FERRY_ERR_INVALID_ARGUMENT, FERRY_ERR_CLOSED (the user's App was freed). An App freed while
 *  the open waits completes it with FERRY_ERR_SYNC ("the App was closed"). */
int ferry_sync_open_async(ferry_user_t *user, const ferry_sync_options_t *opts, ferry_sync_open_cb callback, void *userdata);

/** Calls back once every local change committed before this call is durable on the server,
 *  or with the error that stopped the session (a wait never hangs on a dead session). */
int ferry_sync_wait_for_upload(ferry_sync_session_t *session, ferry_status_cb callback, void *userdata);

/** Calls back once the receipt (from ferry_db_commit_with_receipt on the session's database)
 *  reaches state (a ferry_receipt_state_t) or a later one, or a final state: a wait for
 *  REJECTED ends with ACKNOWLEDGED when the server accepted the transaction. The callback
 *  gets the receipt as ferry_db_read_receipt gives it, exactly once, on the loop thread (also
 *  when the state is already reached); or, when the session stops first (freed: FERRY_ERR_CLOSED,
 *  or a fatal error), the error. ACKNOWLEDGED is reported only once the server's answer to the
 *  upload is complete (the next acknowledgement shows it, or a MARK Ferry sends once a host
 *  asks about receipts; docs/c-api.md), so an ACKNOWLEDGED receipt never turns REJECTED.
 *  After a restart, receipts are read from the file: open the session again and wait again.
 *  Errors of the call itself (then the callback is not called): FERRY_ERR_INVALID_HANDLE,
 *  FERRY_ERR_INVALID_ARGUMENT (no callback, an unknown state), FERRY_ERR_NOT_FOUND (a receipt
 *  the file never gave, or expired), FERRY_ERR_CLOSED. */
int ferry_sync_wait_for_receipt(ferry_sync_session_t *session, uint64_t receipt, int32_t state,
                                ferry_receipt_cb callback, void *userdata);

/** Calls back once everything the server had when the request reached it is integrated. */
int ferry_sync_wait_for_download(ferry_sync_session_t *session, ferry_status_cb callback, void *userdata);

/** Stops the session (pending waits complete with FERRY_ERR_CLOSED) and frees it. Not from
 *  the loop thread. */
void ferry_sync_session_free(ferry_sync_session_t *session);

/** Writes a copy of the session's database, with its data and subscriptions, to a new file at
 *  path that another user's synced open (ferry_sync_open with that user) can use (SPEC
 *  F-COPY). The copy has no sync identity and no history: the server sees a new device, which
 *  uploads nothing of this file's past. Only synced-to-synced copies exist (Ferry has no call
 *  copying a local database into a synced one or back). Any thread but the loop thread.
 *  Errors: FERRY_ERR_INVALID_HANDLE, FERRY_ERR_INVALID_ARGUMENT (NULL or existing path, local
 *  changes not acknowledged yet: wait for upload first), FERRY_ERR_IO. */
int ferry_sync_write_copy(ferry_sync_session_t *session, const char *path);

/* --- Session state, pause and resume, progress (SPEC F-CONNSTATE, F-SUSPEND, F-PROGRESS) --- */

typedef enum ferry_connection_state {
  FERRY_CONNECTION_DISCONNECTED = 0, FERRY_CONNECTION_CONNECTING = 1, FERRY_CONNECTION_CONNECTED = 2
} ferry_connection_state_t;

typedef enum ferry_session_state {
  FERRY_SESSION_ACTIVE = 0,  /* syncing, or trying to while offline */
  FERRY_SESSION_PAUSED = 1,  /* suspended by the host */
  FERRY_SESSION_INACTIVE = 2 /* ended: freed App, logged-out user, or a fatal error */
} ferry_session_state_t;

/** The state of the connection the session syncs over (disconnected while paused or ended),
 *  and the session's own state. Any thread. */
int ferry_sync_connection_state(int32_t *out, const ferry_sync_session_t *session);
int ferry_sync_session_state(int32_t *out, const ferry_sync_session_t *session);

typedef struct ferry_connection_state_token ferry_connection_state_token_t;

/** Called on the loop thread at every change of the session's connection state. */
typedef void (*ferry_connection_state_cb)(void *userdata, int32_t old_state, int32_t new_state);

/** Observes the session's connection state until the token is freed. userdata is handed
 *  over (freed with userdata_free when the token is freed, or at once when the call fails). */
int ferry_sync_observe_connection_state(ferry_connection_state_token_t **out, ferry_sync_session_t *session,
                                        ferry_connection_state_cb callback, void *userdata, ferry_free_fn userdata_free);

/** Unregisters; userdata_free runs on the loop thread after any delivery in progress, so no
 *  callback uses the userdata after it. Any thread; NULL is a no-op. */
void ferry_connection_state_token_free(ferry_connection_state_token_t *token);

/** Pauses the session in both directions: it leaves its connection (closed when no other
 *  session uses it); local writes are kept and uploaded after ferry_sync_resume; pending waits
 *  stay pending. Other sessions keep syncing. No-op when already paused or ended. Returns at
 *  once: ferry_sync_session_state reads PAUSED from then on; the connection state turns
 *  DISCONNECTED shortly after, on the loop thread (observe it to know when). */
int ferry_sync_suspend(ferry_sync_session_t *session);
/** Resumes a paused session: ACTIVE at once, then it connects (or joins its user's
 *  connection) and catches up both ways. No-op unless paused. */
int ferry_sync_resume(ferry_sync_session_t *session);

typedef enum ferry_progress_direction { FERRY_PROGRESS_UPLOAD = 0, FERRY_PROGRESS_DOWNLOAD = 1 } ferry_progress_direction_t;

typedef enum ferry_progress_mode {
  FERRY_PROGRESS_REPORT_INDEFINITELY = 0,  /* every unit of work, until the token is freed */
  FERRY_PROGRESS_FOR_CURRENT_WORK = 1      /* the work outstanding at registration; stops after 1.0 */
} ferry_progress_mode_t;

/** One report: within a unit of work progress_estimate never goes down, stays in [0.0, 1.0]
 *  and is exactly 1.0 when the work is done. Bytes are changeset bytes (uploads: acknowledged
 *  out of committed; downloads: received out of announced by the server). */
typedef struct ferry_progress {
  double progress_estimate;
  uint64_t transferred_bytes;
  uint64_t transferable_bytes;
} ferry_progress_t;

typedef struct ferry_progress_token ferry_progress_token_t;

/** Called on the loop thread; progress is lent for the call. */
typedef void (*ferry_progress_cb)(void *userdata, const ferry_progress_t *progress);

/** Registers a progress notifier on a direction (ferry_progress_direction_t) with a mode
 *  (ferry_progress_mode_t). The first report follows shortly on the loop thread. userdata is
 *  handed over as for ferry_sync_observe_connection_state. A FOR_CURRENT_WORK notifier stops
 *  by itself after reporting 1.0; free its token all the same. */
int ferry_sync_observe_progress(ferry_progress_token_t **out, ferry_sync_session_t *session, int32_t direction, int32_t mode,
                                ferry_progress_cb callback, void *userdata, ferry_free_fn userdata_free);

/** Unregisters; userdata_free runs on the loop thread after any delivery in progress. Any
 *  thread; NULL is a no-op. */
void ferry_progress_token_free(ferry_progress_token_t *token);

/* --- Subscriptions (SPEC F-SUBS) --------------------------------------------------------- */

typedef enum ferry_subscription_state {
  FERRY_SUBSCRIPTIONS_PENDING = 0,   /* not yet complete on the server */
  FERRY_SUBSCRIPTIONS_COMPLETE = 1,  /* the server sent everything it matches */
  FERRY_SUBSCRIPTIONS_ERROR = 2,     /* rejected: see ferry_subscription_set_error */
  FERRY_SUBSCRIPTIONS_SUPERSEDED = 3
} ferry_subscription_state_t;

/** A copy of the session's current subscription set, owned by the caller. Edit it with the
 *  functions below and commit it with ferry_sync_update_subscriptions. */
int ferry_sync_subscriptions(ferry_subscription_set_t **out, ferry_sync_session_t *session);
void ferry_subscription_set_free(ferry_subscription_set_t *set);
int ferry_subscription_set_version(uint64_t *out, const ferry_subscription_set_t *set);
int ferry_subscription_set_state(int32_t *out, const ferry_subscription_set_t *set);
/** The server's message for a rejected set ("" otherwise); lent until the set is freed or edited. */
int ferry_subscription_set_error(const char **out, const ferry_subscription_set_t *set);
int ferry_subscription_set_count(size_t *out, const ferry_subscription_set_t *set);
/** The subscription at index; strings lent until the set is freed or edited. Any out may be NULL. */
int ferry_subscription_set_get(const char **out_name, const char **out_object_type, const char **out_query,
                               const ferry_subscription_set_t *set, size_t index);
/** Adds a named query on an object type, replacing a subscription of the same name. */
int ferry_subscription_set_add(ferry_subscription_set_t *set, const char *name, const char *object_type, const char *query);
/** Removes by name (*out_removed, may be NULL, says whether it existed). */
int ferry_subscription_set_remove(bool *out_removed, ferry_subscription_set_t *set, const char *name);
/** Removes every subscription on an object type (*out_removed, may be NULL: how many). */
int ferry_subscription_set_remove_type(size_t *out_removed, ferry_subscription_set_t *set, const char *object_type);
int ferry_subscription_set_remove_all(ferry_subscription_set_t *set);

/** Replaces the session's subscription set with set's subscriptions, atomically, as the next
 *  version (*out_version, may be NULL), state pending, and sends it to the server. Waits for
 *  a sync write in progress on the file; FERRY_ERR_ALREADY_IN_TRANSACTION when the calling
 *  thread itself has a write transaction open on the file (waiting would deadlock). */
int ferry_sync_update_subscriptions(uint64_t *out_version, ferry_sync_session_t *session, const ferry_subscription_set_t *set);

/** Calls back once the set of this version (or a later one) is complete, or with
 *  FERRY_ERR_SYNC and the server's message when it was rejected. */
int ferry_sync_wait_for_subscriptions(ferry_sync_session_t *session, uint64_t version, ferry_status_cb callback, void *userdata);

/* --- Querying the server online (issue 24) ---------------------------------------------- */

/* The seeds' MongoClient path: a user's device asks the server for the objects of a class that
 * match a query, as the server holds them now, with exactly that user's rules (what its role
 * may read; an object it may not read is not there). Nothing is subscribed and nothing is
 * stored on the device: the results live in memory until freed. It needs the network and the
 * server's Data API (the app directory's http_endpoints/data_api_config.json with
 * "disabled": false, docs/backend.md). */

/** The most objects one ferry_remote_find returns. */
#define FERRY_REMOTE_FIND_MAX_LIMIT 100000

/** The objects a ferry_remote_find returned, in primary-key order, with their values. */
typedef struct ferry_remote_results ferry_remote_results_t;

/** Completion of ferry_remote_find: on success results is a new handle owned by the callee
 *  (free it with ferry_remote_results_free, from any thread, also after the callback) and
 *  error is NULL; on failure results is NULL and error is lent for the call. */
typedef void (*ferry_remote_find_cb)(void *userdata, ferry_remote_results_t *results, const ferry_error_t *error);

/** Completion of ferry_remote_count: the count (0 on failure) and NULL, or the failure (lent
 *  for the call). */
typedef void (*ferry_remote_count_cb)(void *userdata, uint64_t count, const ferry_error_t *error);

/** Asks the server for at most limit (1 to FERRY_REMOTE_FIND_MAX_LIMIT) objects of class_name
 *  that match query (Ferry's query language as in ferry_db_query, "TRUEPREDICATE" for all)
 *  with args for $0, $1, ... (copied before the call returns), among those the user's rules
 *  let it read, in primary-key order. Ferry follows the server's pages (up to 1,000 objects
 *  per request) until it has limit objects or the server has no more. With SORT or LIMIT in
 *  the query the server answers one page in the query's order: at most 1,000 objects (and
 *  limit, and LIMIT's), from a class of at most 100,000 objects. An access token the server refuses (expired) is refreshed once and the
 *  request repeated. Any thread; returns at once; the callback runs exactly once, on the loop
 *  thread (see this section's introduction), unless the call itself fails.
 *  Errors of the call itself (then the callback is not called): FERRY_ERR_INVALID_HANDLE
 *  (user), FERRY_ERR_INVALID_ARGUMENT (NULL class_name, query or callback, an empty class
 *  name, limit 0 or above the maximum, args NULL with arg_count > 0, malformed argument
 *  bytes), FERRY_ERR_WRONG_TYPE (an argument with an unknown type tag), FERRY_ERR_AUTH (the
 *  user is logged out), FERRY_ERR_CLOSED (the user's App was freed).
 *  Errors the callback gets, each with the server's message, error code and HTTP status:
 *  FERRY_ERR_NO_SUCH_CLASS (the server's schema has no such class), FERRY_ERR_QUERY (the
 *  server refused the query or its arguments: it does not parse, does not fit the class,
 *  $n past the arguments; SORT on a class of more than 100,000 objects; SORT or LIMIT in a
 *  count), FERRY_ERR_AUTH (the token was refused again after a
 *  refresh, or could not be refreshed; the user logged out between two pages),
 *  FERRY_ERR_SYNC (any other refusal: the Data API is off or the app unknown, 404; sync
 *  paused by an admin, 503), FERRY_ERR_NETWORK (the server could not be reached, or the
 *  connection broke), FERRY_ERR_TIMEOUT (a request took longer than the App's
 *  request_timeout_ms), FERRY_ERR_CORRUPT (an answer that is not the Data API's JSON),
 *  FERRY_ERR_CLOSED (the App was freed before the answer came). */
int ferry_remote_find(ferry_user_t *user, const char *class_name, const char *query, const ferry_value_t *args,
                      size_t arg_count, size_t limit, ferry_remote_find_cb callback, void *userdata);

/** Asks the server how many objects of class_name match query (with args, as in
 *  ferry_remote_find) among those the user's rules let it read. The server counts a large
 *  class in several requests; Ferry adds them up. Threads, the callback and every error: as
 *  ferry_remote_find (without limit). */
int ferry_remote_count(ferry_user_t *user, const char *class_name, const char *query, const ferry_value_t *args,
                       size_t arg_count, ferry_remote_count_cb callback, void *userdata);

/** The number of objects in the results. Errors: FERRY_ERR_INVALID_HANDLE,
 *  FERRY_ERR_INVALID_ARGUMENT. */
int ferry_remote_results_count(size_t *out, const ferry_remote_results_t *results);

/** The object at index as the server sent it: a JSON object in MongoDB Extended JSON (v2,
 *  relaxed; docs/backend.md), NUL-terminated UTF-8 lent for the results' lifetime.
 *  Errors: FERRY_ERR_OUT_OF_RANGE (index >= count), FERRY_ERR_INVALID_HANDLE,
 *  FERRY_ERR_INVALID_ARGUMENT. */
int ferry_remote_results_json(const char **out, const ferry_remote_results_t *results, size_t index);

/** The number of fields (properties) of the object at index, and the field at field_index:
 *  its name (lent for the results' lifetime) and whether it is a list. Either out may be NULL.
 *  Errors: FERRY_ERR_OUT_OF_RANGE, FERRY_ERR_INVALID_HANDLE, FERRY_ERR_INVALID_ARGUMENT. */
int ferry_remote_results_field_count(size_t *out, const ferry_remote_results_t *results, size_t index);
int ferry_remote_results_field(const char **out_name, bool *out_is_list, const ferry_remote_results_t *results,
                               size_t index, size_t field_index);

/** The value of the property named property of the object at index, decoded from its Extended
 *  JSON by its own encoding: a whole number is FERRY_TYPE_INT (exactly, Int64's ends too),
 *  one with a fraction or exponent FERRY_TYPE_DOUBLE, {"$oid"} FERRY_TYPE_OBJECT_ID, {"$uuid"}
 *  FERRY_TYPE_UUID, {"$date"} FERRY_TYPE_TIMESTAMP, {"$binary"} FERRY_TYPE_BINARY, null
 *  FERRY_TYPE_NULL; a link reads as its target's primary key. Strings and binaries are lent
 *  for the results' lifetime. Errors: FERRY_ERR_NO_SUCH_PROPERTY (the object has no such
 *  field), FERRY_ERR_WRONG_TYPE (a list: use ferry_remote_results_get_list),
 *  FERRY_ERR_OUT_OF_RANGE, FERRY_ERR_INVALID_HANDLE, FERRY_ERR_INVALID_ARGUMENT. */
int ferry_remote_results_get_value(ferry_value_t *out, const ferry_remote_results_t *results, size_t index,
                                   const char *property);

/** A list property's elements: *out_values points to *out_count values, lent for the results'
 *  lifetime (NULL when empty). Errors: FERRY_ERR_WRONG_TYPE (not a list), and those of
 *  ferry_remote_results_get_value. */
int ferry_remote_results_get_list(const ferry_value_t **out_values, size_t *out_count, const ferry_remote_results_t *results,
                                  size_t index, const char *property);

/** Frees results. NULL is a no-op. Any thread. */
void ferry_remote_results_free(ferry_remote_results_t *results);

#ifdef __cplusplus
}
#endif

#endif /* FERRY_H */
