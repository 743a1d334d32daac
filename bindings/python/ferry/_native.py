"""Low-level ctypes declarations of ``include/ferry.h``.

This module mirrors the C header one to one: the structs, the enums and the argument and
result types of every exported function. Nothing here is Pythonic; the rest of the package
builds on it. It is importable without the library: :func:`lib` loads ``libferry.so`` on
first use.

The library is found through the ``FERRY_LIBRARY`` environment variable (an absolute path)
when it is set, and otherwise by its bare name ``libferry.so`` on the dynamic loader's path
(as installed by ``cmake --install`` followed by ``ldconfig``).
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    Union,
    c_bool,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Optional

__all__ = [
    "lib",
    "library_path",
    "FERRY_OK",
    "FERRY_DB_OPTIONS_VERSION",
    "Value",
    "PropertyInfo",
    "ClassInfo",
    "DbOptions",
    "PropertyValue",
    "ChangeSet",
    "Error",
    "CHANGE_CB",
    "FREE_FN",
]

# --- Constants from the header ------------------------------------------------------------

FERRY_OK = 0

FERRY_ERR_INVALID_ARGUMENT = -1
FERRY_ERR_INVALID_HANDLE = -2
FERRY_ERR_NO_MEMORY = -3
FERRY_ERR_IO = -4
FERRY_ERR_CLOSED = -5
FERRY_ERR_NOT_IN_TRANSACTION = -6
FERRY_ERR_ALREADY_IN_TRANSACTION = -7
FERRY_ERR_NO_SUCH_CLASS = -8
FERRY_ERR_NO_SUCH_PROPERTY = -9
FERRY_ERR_WRONG_TYPE = -10
FERRY_ERR_NOT_FOUND = -11
FERRY_ERR_DUPLICATE_PRIMARY_KEY = -12
FERRY_ERR_QUERY = -13
FERRY_ERR_INVALID_SCHEMA = -14
FERRY_ERR_SCHEMA_MISMATCH = -15
FERRY_ERR_MULTIPLE_SYNC_AGENTS = -16
FERRY_ERR_OUT_OF_RANGE = -17
FERRY_ERR_CORRUPT = -18
FERRY_ERR_BUSY = -19
FERRY_ERR_NETWORK = -20
FERRY_ERR_AUTH = -21
FERRY_ERR_SYNC = -22
FERRY_ERR_TIMEOUT = -23
FERRY_ERR_WRITE_REJECTED = -24
FERRY_ERR_DECRYPT = -25
FERRY_ERR_INTERNAL = -100

FERRY_TYPE_NULL = 0
FERRY_TYPE_BOOL = 1
FERRY_TYPE_INT = 2
FERRY_TYPE_DOUBLE = 3
FERRY_TYPE_STRING = 4
FERRY_TYPE_BINARY = 5
FERRY_TYPE_TIMESTAMP = 6
FERRY_TYPE_OBJECT_ID = 7
FERRY_TYPE_UUID = 8
FERRY_TYPE_LINK = 9

FERRY_PROPERTY_NORMAL = 0
FERRY_PROPERTY_OPTIONAL = 1
FERRY_PROPERTY_PRIMARY_KEY = 2
FERRY_PROPERTY_INDEXED = 4
FERRY_PROPERTY_LIST = 8

FERRY_CLASS_NORMAL = 0
FERRY_CLASS_ASYMMETRIC = 1

FERRY_DELIVERY_LOOP = 0
FERRY_DELIVERY_POLL = 1

FERRY_DB_OPTIONS_VERSION = 2
FERRY_ENCRYPTION_KEY_SIZE = 64
FERRY_APP_OPTIONS_VERSION = 4
FERRY_SYNC_OPTIONS_VERSION = 5

FERRY_DOWNLOAD_BEFORE_OPEN_NEVER = 0
FERRY_DOWNLOAD_BEFORE_OPEN_ALWAYS = 1
FERRY_DOWNLOAD_BEFORE_OPEN_ONCE = 2

FERRY_CONNECTION_DISCONNECTED = 0
FERRY_CONNECTION_CONNECTING = 1
FERRY_CONNECTION_CONNECTED = 2

FERRY_SESSION_ACTIVE = 0
FERRY_SESSION_PAUSED = 1
FERRY_SESSION_INACTIVE = 2

FERRY_PROGRESS_UPLOAD = 0
FERRY_PROGRESS_DOWNLOAD = 1

FERRY_PROGRESS_REPORT_INDEFINITELY = 0
FERRY_PROGRESS_FOR_CURRENT_WORK = 1

FERRY_CLIENT_RESET_RECOVER_UNSYNCED_CHANGES = 0
FERRY_CLIENT_RESET_RECOVER_OR_DISCARD_UNSYNCED_CHANGES = 1
FERRY_CLIENT_RESET_DISCARD_UNSYNCED_CHANGES = 2
FERRY_CLIENT_RESET_MANUAL = 3

FERRY_CLIENT_RESET_RECOVERED = 0
FERRY_CLIENT_RESET_DISCARDED = 1

# --- Structs ------------------------------------------------------------------------------


class _Bytes(Structure):
    """``struct { const char *data; size_t size; }`` (string and binary members)."""

    # c_void_p rather than c_char_p: the data need not be NUL-terminated and may hold NULs.
    _fields_ = [("data", c_void_p), ("size", c_size_t)]


class _Timestamp(Structure):
    """``struct { int64_t seconds; int32_t nanoseconds; }``."""

    _fields_ = [("seconds", c_int64), ("nanoseconds", c_int32)]


class _ValueUnion(Union):
    _fields_ = [
        ("b", c_bool),
        ("i", c_int64),
        ("d", c_double),
        ("string", _Bytes),
        ("binary", _Bytes),
        ("timestamp", _Timestamp),
        ("object_id", c_uint8 * 12),
        ("uuid", c_uint8 * 16),
    ]


class Value(Structure):
    """``ferry_value_t``: a tagged value."""

    _fields_ = [("type", c_int32), ("u", _ValueUnion)]


class PropertyInfo(Structure):
    """``ferry_property_info_t``."""

    _fields_ = [
        ("name", c_char_p),
        ("type", c_int32),
        ("flags", c_uint32),
        ("link_target", c_char_p),
    ]


class ClassInfo(Structure):
    """``ferry_class_info_t``."""

    _fields_ = [
        ("name", c_char_p),
        ("properties", POINTER(PropertyInfo)),
        ("property_count", c_size_t),
        ("flags", c_uint32),
    ]


class DbOptions(Structure):
    """``ferry_db_options_t`` (version 2)."""

    _fields_ = [
        ("version", c_uint32),
        ("path", c_char_p),
        ("in_memory_identifier", c_char_p),
        ("schema", c_void_p),
        ("delivery", c_int32),
        ("synced", c_bool),
        ("encryption_key", c_void_p),
    ]


class PropertyValue(Structure):
    """``ferry_property_value_t``."""

    _fields_ = [("property", c_uint32), ("value", Value)]


class ChangeSet(Structure):
    """``ferry_change_set_t`` (valid only for the duration of a change callback)."""

    _fields_ = [
        ("inserted", POINTER(Value)),
        ("inserted_count", c_size_t),
        ("deleted", POINTER(Value)),
        ("deleted_count", c_size_t),
        ("modified", POINTER(Value)),
        ("modified_count", c_size_t),
        ("modified_properties", POINTER(c_uint32)),
        ("modified_properties_count", c_size_t),
    ]


class Error(Structure):
    """``ferry_error_t``."""

    _fields_ = [("code", c_int), ("message", c_char_p)]


# --- Sync structs ---------------------------------------------------------------------------

LOG_CB = CFUNCTYPE(None, c_void_p, c_int32, c_char_p)


class AppOptions(Structure):
    """``ferry_app_options_t`` (version 4: version 1 ends at ``log_userdata``, version 2 at
    ``reconnect_delay_max_ms``, version 3 at ``encryption_key``)."""

    _fields_ = [
        ("version", c_uint32),
        ("app_id", c_char_p),
        ("base_url", c_char_p),
        ("base_directory", c_char_p),
        ("ca_file", c_char_p),
        ("reserved", c_bool),  # verify_peer before version 4; never read
        ("request_timeout_ms", c_uint64),
        ("log_level", c_int32),
        ("log_callback", LOG_CB),
        ("log_userdata", c_void_p),
        # version 2
        ("multiplex_sessions", c_bool),
        ("read_timeout_ms", c_uint64),
        ("ping_interval_ms", c_uint64),
        ("reconnect_delay_min_ms", c_uint64),
        ("reconnect_delay_max_ms", c_uint64),
        # version 3
        ("encryption_key", c_void_p),
        # version 4
        ("insecure_skip_verify", c_bool),
        ("allow_insecure_http", c_bool),
    ]


class Credentials(Structure):
    """``ferry_credentials_t``."""

    _fields_ = [
        ("kind", c_int32),
        ("email", c_char_p),
        ("password", c_char_p),
        ("token", c_char_p),
    ]


class CompensatingWrite(Structure):
    """``ferry_compensating_write_t``."""

    _fields_ = [("object_type", c_char_p), ("primary_key", Value), ("reason", c_char_p)]


class RevertedValue(Structure):
    """``ferry_reverted_value_t`` (SPEC F-NOLOSS)."""

    _fields_ = [
        ("property", c_uint32),
        ("name", c_char_p),
        ("is_list", c_bool),
        ("value", Value),
        ("list", POINTER(Value)),
        ("list_count", c_size_t),
    ]


class LocalWrite(Structure):
    """``ferry_local_write_t``."""

    _fields_ = [
        ("local_version", c_uint64),
        ("kind", c_int32),
        ("property", c_char_p),
        ("value", Value),
        ("index", c_size_t),
    ]


class RevertedObject(Structure):
    """``ferry_reverted_object_t`` (lent during the error handler, or a copy)."""

    _fields_ = [
        ("object_type", c_char_p),
        ("primary_key", Value),
        ("revert", c_int32),
        ("values", POINTER(RevertedValue)),
        ("values_count", c_size_t),
        ("writes", POINTER(LocalWrite)),
        ("writes_count", c_size_t),
    ]


class Receipt(Structure):
    """``ferry_receipt_t`` (lent for the callback that receives it)."""

    _fields_ = [
        ("receipt", c_uint64),
        ("state", c_int32),
        ("compensating_writes", POINTER(CompensatingWrite)),
        ("compensating_writes_count", c_size_t),
    ]


class ClientResetEntry(Structure):
    """``ferry_client_reset_entry_t`` (lent with its report)."""

    _fields_ = [
        ("object_type", c_char_p),
        ("primary_key", Value),
        ("outcome", c_int32),
        ("reason", c_char_p),
    ]


class ClientResetReport(Structure):
    """``ferry_client_reset_report_t`` (lent for the callback that receives it)."""

    _fields_ = [
        ("recovered", c_bool),
        ("unsynced_changesets", c_size_t),
        ("entries", POINTER(ClientResetEntry)),
        ("entries_count", c_size_t),
    ]


class SyncErrorInfo(Structure):
    """``ferry_sync_error_t`` (valid only for the duration of the error handler)."""

    _fields_ = [
        ("code", c_int32),
        ("message", c_char_p),
        ("is_fatal", c_bool),
        ("action", c_int32),
        ("compensating_writes", POINTER(CompensatingWrite)),
        ("compensating_writes_count", c_size_t),
        # client reset (SPEC F-RESET)
        ("client_reset_report", POINTER(ClientResetReport)),
        ("client_reset_backup_path", c_char_p),
        ("client_reset_token", c_char_p),
    ]


# ferry_initial_subscriptions_cb: (userdata, lent subscription set) -> FERRY_OK to commit.
INITIAL_SUBSCRIPTIONS_CB = CFUNCTYPE(c_int, c_void_p, c_void_p)
# ferry_client_reset_before_cb: (userdata, lent read-only database before the reset)
CLIENT_RESET_BEFORE_CB = CFUNCTYPE(None, c_void_p, c_void_p)
# ferry_client_reset_after_cb: (userdata, lent before, lent after, lent report)
CLIENT_RESET_AFTER_CB = CFUNCTYPE(None, c_void_p, c_void_p, c_void_p, POINTER(ClientResetReport))
# ferry_precheck_cb: (userdata, lent compensating writes, count, committed)
PRECHECK_CB = CFUNCTYPE(None, c_void_p, POINTER(CompensatingWrite), c_size_t, c_bool)


class SyncOptions(Structure):
    """``ferry_sync_options_t`` (version 4: version 1 ends at ``schema``, version 2 at
    ``rerun_initial_subscriptions``, version 3 at ``after_reset_userdata``)."""

    _fields_ = [
        ("version", c_uint32),
        ("path", c_char_p),
        ("schema", c_void_p),
        # version 2
        ("download_before_open", c_int32),
        ("open_timeout_ms", c_uint64),
        ("in_memory", c_bool),
        ("initial_subscriptions", INITIAL_SUBSCRIPTIONS_CB),
        ("initial_subscriptions_userdata", c_void_p),
        ("rerun_initial_subscriptions", c_bool),
        # version 3
        ("client_reset_mode", c_int32),
        ("before_reset", CLIENT_RESET_BEFORE_CB),
        ("before_reset_userdata", c_void_p),
        ("after_reset", CLIENT_RESET_AFTER_CB),
        ("after_reset_userdata", c_void_p),
        # version 4 (SPEC F-PRECHECK)
        ("precheck_mode", c_int32),
        ("precheck_callback", PRECHECK_CB),
        ("precheck_userdata", c_void_p),
        # version 5
        ("encryption_key", c_void_p),
    ]


class Progress(Structure):
    """``ferry_progress_t`` (lent for the duration of a progress callback)."""

    _fields_ = [
        ("progress_estimate", c_double),
        ("transferred_bytes", c_uint64),
        ("transferable_bytes", c_uint64),
    ]


# Callback types. CFUNCTYPE (not PYFUNCTYPE): the GIL is taken when C calls in.
CHANGE_CB = CFUNCTYPE(None, c_void_p, POINTER(ChangeSet))
FREE_FN = CFUNCTYPE(None, c_void_p)
STATUS_CB = CFUNCTYPE(None, c_void_p, POINTER(Error))
USER_CB = CFUNCTYPE(None, c_void_p, c_void_p, POINTER(Error))
SYNC_ERROR_CB = CFUNCTYPE(None, c_void_p, c_void_p, POINTER(SyncErrorInfo))
# ferry_sync_open_cb: (userdata, session, db, error)
SYNC_OPEN_CB = CFUNCTYPE(None, c_void_p, c_void_p, c_void_p, POINTER(Error))
# ferry_connection_state_cb: (userdata, old_state, new_state)
CONNECTION_STATE_CB = CFUNCTYPE(None, c_void_p, c_int32, c_int32)
PROGRESS_CB = CFUNCTYPE(None, c_void_p, POINTER(Progress))
# ferry_receipt_cb: (userdata, lent receipt or NULL, lent error or NULL)
RECEIPT_CB = CFUNCTYPE(None, c_void_p, POINTER(Receipt), POINTER(Error))
# ferry_remote_find_cb: (userdata, results owned by the callee or NULL, lent error or NULL)
REMOTE_FIND_CB = CFUNCTYPE(None, c_void_p, c_void_p, POINTER(Error))
# ferry_remote_count_cb: (userdata, count, lent error or NULL)
REMOTE_COUNT_CB = CFUNCTYPE(None, c_void_p, c_uint64, POINTER(Error))

FERRY_REMOTE_FIND_MAX_LIMIT = 100000

_pp = POINTER(c_void_p)
_pv = POINTER(Value)

# name: (restype, argtypes). Every function of ferry.h, in header order.
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    # Version
    "ferry_version": (c_char_p, []),
    "ferry_version_number": (c_int, []),
    # Errors
    "ferry_error_last": (POINTER(Error), []),
    "ferry_strerror": (c_char_p, [c_int]),
    # Values
    "ferry_object_id_generate": (c_int, [_pv]),
    # Schema
    "ferry_schema_new": (c_int, [_pp, POINTER(ClassInfo), c_size_t]),
    "ferry_schema_free": (None, [c_void_p]),
    # Databases
    "ferry_db_options_init": (c_int, [POINTER(DbOptions), c_uint32]),
    "ferry_db_open": (c_int, [_pp, POINTER(DbOptions)]),
    "ferry_db_change_key": (c_int, [c_char_p, c_void_p, c_void_p]),
    "ferry_db_close": (c_int, [c_void_p]),
    "ferry_db_free": (None, [c_void_p]),
    "ferry_db_is_closed": (c_int, [POINTER(c_bool), c_void_p]),
    "ferry_db_write_copy": (c_int, [c_void_p, c_char_p]),
    "ferry_db_class_count": (c_int, [POINTER(c_size_t), c_void_p]),
    "ferry_db_find_class": (c_int, [POINTER(c_uint32), c_void_p, c_char_p]),
    "ferry_db_get_class": (c_int, [POINTER(ClassInfo), c_void_p, c_uint32]),
    "ferry_db_find_property": (c_int, [POINTER(c_uint32), c_void_p, c_uint32, c_char_p]),
    "ferry_db_get_property": (c_int, [POINTER(PropertyInfo), c_void_p, c_uint32, c_uint32]),
    # Write transactions
    "ferry_db_begin_write": (c_int, [c_void_p]),
    "ferry_db_commit": (c_int, [c_void_p]),
    "ferry_db_commit_with_receipt": (c_int, [POINTER(c_uint64), c_void_p]),
    "ferry_db_cancel": (c_int, [c_void_p]),
    "ferry_db_is_in_transaction": (c_int, [POINTER(c_bool), c_void_p]),
    # Writing objects
    "ferry_object_create": (c_int, [c_void_p, c_uint32, POINTER(PropertyValue), c_size_t]),
    "ferry_object_upsert": (c_int, [c_void_p, c_uint32, POINTER(PropertyValue), c_size_t]),
    "ferry_object_set": (c_int, [c_void_p, c_uint32, _pv, c_uint32, _pv]),
    "ferry_object_add_int": (c_int, [c_void_p, c_uint32, _pv, c_uint32, c_int64]),
    "ferry_object_delete": (c_int, [c_void_p, c_uint32, _pv]),
    "ferry_list_insert": (c_int, [c_void_p, c_uint32, _pv, c_uint32, c_size_t, _pv]),
    "ferry_list_set": (c_int, [c_void_p, c_uint32, _pv, c_uint32, c_size_t, _pv]),
    "ferry_list_erase": (c_int, [c_void_p, c_uint32, _pv, c_uint32, c_size_t]),
    "ferry_list_clear": (c_int, [c_void_p, c_uint32, _pv, c_uint32]),
    # Reading objects
    "ferry_object_get": (c_int, [_pp, c_void_p, c_uint32, _pv]),
    "ferry_object_get_class": (c_int, [POINTER(c_uint32), c_void_p]),
    "ferry_object_get_value": (c_int, [_pv, c_void_p, c_uint32]),
    "ferry_object_get_list": (c_int, [POINTER(_pv), POINTER(c_size_t), c_void_p, c_uint32]),
    "ferry_object_free": (None, [c_void_p]),
    # Queries
    "ferry_db_query": (c_int, [_pp, c_void_p, c_uint32, c_char_p, _pv, c_size_t]),
    "ferry_results_count": (c_int, [POINTER(c_size_t), c_void_p]),
    "ferry_results_get": (c_int, [_pp, c_void_p, c_size_t]),
    "ferry_results_free": (None, [c_void_p]),
    # Notifications
    "ferry_db_observe_query": (
        c_int,
        [_pp, c_void_p, c_uint32, c_char_p, _pv, c_size_t, CHANGE_CB, c_void_p, FREE_FN],
    ),
    "ferry_db_observe_object": (
        c_int,
        [_pp, c_void_p, c_uint32, _pv, CHANGE_CB, c_void_p, FREE_FN],
    ),
    "ferry_notification_token_free": (None, [c_void_p]),
    "ferry_db_notification_fd": (c_int, [POINTER(c_int), c_void_p]),
    "ferry_db_deliver_notifications": (c_int, [POINTER(c_size_t), c_void_p]),
    # History
    "ferry_db_history_count": (c_int, [POINTER(c_uint64), c_void_p]),
    "ferry_db_verify_history": (c_int, [c_void_p]),
    # Sync: Apps and users
    "ferry_app_options_init": (c_int, [POINTER(AppOptions), c_uint32]),
    "ferry_app_new": (c_int, [_pp, POINTER(AppOptions)]),
    "ferry_app_reconnect": (c_int, [c_void_p]),
    "ferry_app_free": (None, [c_void_p]),
    "ferry_app_log_in": (c_int, [c_void_p, POINTER(Credentials), USER_CB, c_void_p]),
    "ferry_app_register_email": (c_int, [c_void_p, c_char_p, c_char_p, STATUS_CB, c_void_p]),
    "ferry_app_log_out": (c_int, [c_void_p, c_void_p, STATUS_CB, c_void_p]),
    "ferry_app_current_user": (c_int, [_pp, c_void_p]),
    "ferry_app_user_count": (c_int, [POINTER(c_size_t), c_void_p]),
    "ferry_app_get_user": (c_int, [_pp, c_void_p, c_size_t]),
    "ferry_user_id": (c_int, [POINTER(c_char_p), c_void_p]),
    "ferry_user_state": (c_int, [POINTER(c_int32), c_void_p]),
    "ferry_user_free": (None, [c_void_p]),
    # Sync: errors
    "ferry_app_set_sync_error_handler": (c_int, [c_void_p, SYNC_ERROR_CB, c_void_p, FREE_FN]),
    # Sync: write receipts
    "ferry_db_receipt_state": (c_int, [POINTER(c_int32), c_void_p, c_uint64]),
    "ferry_db_read_receipt": (c_int, [c_void_p, c_uint64, RECEIPT_CB, c_void_p]),
    # Sync: client reset
    "ferry_app_handle_client_reset": (c_int, [c_void_p, c_char_p]),
    # what a compensating write took (SPEC F-NOLOSS)
    "ferry_sync_error_reverted_object": (c_int, [POINTER(POINTER(RevertedObject)), POINTER(SyncErrorInfo), c_size_t]),
    "ferry_reverted_object_copy": (c_int, [POINTER(POINTER(RevertedObject)), POINTER(RevertedObject)]),
    "ferry_reverted_object_free": (None, [POINTER(RevertedObject)]),
    "ferry_db_reapply_reverted": (c_int, [c_void_p, POINTER(RevertedObject), POINTER(PropertyValue), c_size_t]),
    # Sync: synced databases
    "ferry_sync_options_init": (c_int, [POINTER(SyncOptions), c_uint32]),
    "ferry_sync_open": (c_int, [_pp, _pp, c_void_p, POINTER(SyncOptions)]),
    "ferry_sync_open_async": (c_int, [c_void_p, POINTER(SyncOptions), SYNC_OPEN_CB, c_void_p]),
    "ferry_sync_wait_for_upload": (c_int, [c_void_p, STATUS_CB, c_void_p]),
    "ferry_sync_wait_for_receipt": (c_int, [c_void_p, c_uint64, c_int32, RECEIPT_CB, c_void_p]),
    "ferry_sync_wait_for_download": (c_int, [c_void_p, STATUS_CB, c_void_p]),
    "ferry_sync_session_free": (None, [c_void_p]),
    # Sync: session state, pause and resume, progress
    "ferry_sync_connection_state": (c_int, [POINTER(c_int32), c_void_p]),
    "ferry_sync_session_state": (c_int, [POINTER(c_int32), c_void_p]),
    "ferry_sync_observe_connection_state": (
        c_int,
        [_pp, c_void_p, CONNECTION_STATE_CB, c_void_p, FREE_FN],
    ),
    "ferry_connection_state_token_free": (None, [c_void_p]),
    "ferry_sync_suspend": (c_int, [c_void_p]),
    "ferry_sync_resume": (c_int, [c_void_p]),
    "ferry_sync_write_copy": (c_int, [c_void_p, c_char_p]),
    "ferry_sync_observe_progress": (
        c_int,
        [_pp, c_void_p, c_int32, c_int32, PROGRESS_CB, c_void_p, FREE_FN],
    ),
    "ferry_progress_token_free": (None, [c_void_p]),
    # Sync: subscriptions
    "ferry_sync_subscriptions": (c_int, [_pp, c_void_p]),
    "ferry_subscription_set_free": (None, [c_void_p]),
    "ferry_subscription_set_version": (c_int, [POINTER(c_uint64), c_void_p]),
    "ferry_subscription_set_state": (c_int, [POINTER(c_int32), c_void_p]),
    "ferry_subscription_set_error": (c_int, [POINTER(c_char_p), c_void_p]),
    "ferry_subscription_set_count": (c_int, [POINTER(c_size_t), c_void_p]),
    "ferry_subscription_set_get": (
        c_int,
        [POINTER(c_char_p), POINTER(c_char_p), POINTER(c_char_p), c_void_p, c_size_t],
    ),
    "ferry_subscription_set_add": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p]),
    "ferry_subscription_set_remove": (c_int, [POINTER(c_bool), c_void_p, c_char_p]),
    "ferry_subscription_set_remove_type": (c_int, [POINTER(c_size_t), c_void_p, c_char_p]),
    "ferry_subscription_set_remove_all": (c_int, [c_void_p]),
    "ferry_sync_update_subscriptions": (c_int, [POINTER(c_uint64), c_void_p, c_void_p]),
    "ferry_sync_wait_for_subscriptions": (c_int, [c_void_p, c_uint64, STATUS_CB, c_void_p]),
    # Querying the server online (issue 24)
    "ferry_remote_find": (
        c_int,
        [c_void_p, c_char_p, c_char_p, _pv, c_size_t, c_size_t, REMOTE_FIND_CB, c_void_p],
    ),
    "ferry_remote_count": (c_int, [c_void_p, c_char_p, c_char_p, _pv, c_size_t, REMOTE_COUNT_CB, c_void_p]),
    "ferry_remote_results_count": (c_int, [POINTER(c_size_t), c_void_p]),
    "ferry_remote_results_json": (c_int, [POINTER(c_char_p), c_void_p, c_size_t]),
    "ferry_remote_results_field_count": (c_int, [POINTER(c_size_t), c_void_p, c_size_t]),
    "ferry_remote_results_field": (c_int, [POINTER(c_char_p), POINTER(c_bool), c_void_p, c_size_t, c_size_t]),
    "ferry_remote_results_get_value": (c_int, [_pv, c_void_p, c_size_t, c_char_p]),
    "ferry_remote_results_get_list": (c_int, [POINTER(_pv), POINTER(c_size_t), c_void_p, c_size_t, c_char_p]),
    "ferry_remote_results_free": (None, [c_void_p]),
}

FUNCTION_NAMES: tuple[str, ...] = tuple(_SIGNATURES)
"""The names of every function declared in ``ferry.h``."""

_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None
_lock = threading.Lock()


def library_path() -> str:
    """The path or name the library is (or will be) loaded from."""
    return os.environ.get("FERRY_LIBRARY") or "libferry.so"


def lib() -> ctypes.CDLL:
    """The loaded ``libferry.so`` with every function's signature declared.

    Loaded on first call from ``$FERRY_LIBRARY`` or ``libferry.so``.

    Raises:
        OSError: the library cannot be loaded, or lacks a function the header declares.
    """
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = library_path()
            try:
                loaded = ctypes.CDLL(path)
            except OSError as exc:
                raise OSError(
                    f"cannot load the Ferry library from {path!r} ({exc}); set FERRY_LIBRARY "
                    "to the absolute path of libferry.so or install it on the loader path"
                ) from exc
            for name, (restype, argtypes) in _SIGNATURES.items():
                try:
                    fn = getattr(loaded, name)
                except AttributeError as exc:
                    raise OSError(f"{path} does not export {name} declared in ferry.h") from exc
                fn.restype = restype
                fn.argtypes = argtypes
            _lib_path = path
            _lib = loaded
    return _lib
