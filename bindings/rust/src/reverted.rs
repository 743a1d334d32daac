//! What the revert of a compensating write took from the device (SPEC F-NOLOSS), and putting
//! it back.

use std::ptr::{self, NonNull};

use crate::error::{Error, Result};
use crate::schema::string_from;
use crate::sys;
use crate::value::Value;

/// What the revert did to the device's object (`ferry_revert_kind_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RevertKind {
    /// The device had the object and the revert erased it (a refused create, or an update that
    /// took it out of the user's view); `values` holds every property.
    Removed,
    /// The revert set properties back to the server's values; `values` holds the device's.
    Changed,
    /// The device had deleted the object and the revert brought it back; `values` is empty.
    Restored,
    /// A kind this binding does not know.
    Unknown(i32),
}

/// The kind of a [`LocalWrite`] (`ferry_write_kind_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteKind {
    /// Created the object.
    Create,
    /// Deleted the object.
    Delete,
    /// Set a property.
    Set,
    /// Added to an int property.
    AddInt,
    /// Inserted into a list.
    ListInsert,
    /// Replaced a list element.
    ListSet,
    /// Removed a list element.
    ListErase,
    /// Emptied a list.
    ListClear,
    /// A kind this binding does not know.
    Unknown(i32),
}

/// One property's value as the device had it just before the revert.
#[derive(Debug, Clone, PartialEq)]
pub struct RevertedValue {
    /// The property's name.
    pub name: String,
    /// The value; [`Value::Null`] for a list.
    pub value: Value,
    /// A list property's elements; `None` for other properties.
    pub list: Option<Vec<Value>>,
}

/// One local write the revert undid or discarded (`ferry_local_write_t`).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalWrite {
    /// The write transaction that made it (the device's commits count 1, 2, 3...).
    pub local_version: u64,
    /// What the write did.
    pub kind: WriteKind,
    /// The property; `None` for [`WriteKind::Create`] and [`WriteKind::Delete`].
    pub property: Option<String>,
    /// Set, list insert and list set: the value; add: the delta; otherwise [`Value::Null`].
    pub value: Value,
    /// The list position of list inserts, sets and erases; otherwise 0.
    pub index: usize,
}

/// What the revert of a compensating write took from one object: the device's values before
/// the revert of the properties it removed or changed back, and the local writes it undid or
/// discarded. Put it back with [`Transaction::reapply_reverted`](crate::Transaction::reapply_reverted).
/// Holds the library's copy of the record (`ferry_reverted_object_copy`), freed on drop.
#[derive(Debug)]
pub struct RevertedObject {
    /// The object's class, e.g. `"Item"`.
    pub object_type: String,
    /// The object's primary key.
    pub primary_key: Value,
    /// What the revert did to the device's object.
    pub revert: RevertKind,
    /// In schema order.
    pub values: Vec<RevertedValue>,
    /// Oldest first.
    pub writes: Vec<LocalWrite>,
    raw: NonNull<sys::ferry_reverted_object_t>,
}

// SAFETY: the library's copy is immutable and its functions may be called from any thread.
unsafe impl Send for RevertedObject {}
unsafe impl Sync for RevertedObject {}

impl PartialEq for RevertedObject {
    fn eq(&self, other: &RevertedObject) -> bool {
        (&self.object_type, &self.primary_key, self.revert, &self.values, &self.writes)
            == (&other.object_type, &other.primary_key, other.revert, &other.values, &other.writes)
    }
}

impl Drop for RevertedObject {
    fn drop(&mut self) {
        // SAFETY: our own copy, freed once.
        unsafe { sys::ferry_reverted_object_free(self.raw.as_ptr()) }
    }
}

fn value_or_null(raw: &sys::ferry_value_t) -> Value {
    // SAFETY: values lent by the library are valid.
    unsafe { Value::from_raw(raw) }.unwrap_or(Value::Null)
}

impl RevertedObject {
    /// The record of `compensating_writes[index]` of an error lent to the handler, copied;
    /// `None` when the revert took nothing.
    ///
    /// # Safety
    /// `error` must be the error lent to the running handler.
    pub(crate) unsafe fn from_error(
        error: *const sys::ferry_sync_error_t,
        index: usize,
    ) -> Option<RevertedObject> {
        let mut lent: *const sys::ferry_reverted_object_t = ptr::null();
        if sys::ferry_sync_error_reverted_object(&mut lent, error, index) != sys::FERRY_OK
            || lent.is_null()
        {
            return None;
        }
        let mut copy: *mut sys::ferry_reverted_object_t = ptr::null_mut();
        if sys::ferry_reverted_object_copy(&mut copy, lent) != sys::FERRY_OK {
            return None;
        }
        let raw = NonNull::new(copy)?;
        let r = raw.as_ref();
        let values = if r.values.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(r.values, r.values_count)
        };
        let writes = if r.writes.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(r.writes, r.writes_count)
        };
        Some(RevertedObject {
            object_type: string_from(r.object_type).unwrap_or_default(),
            primary_key: value_or_null(&r.primary_key),
            revert: match r.revert {
                sys::FERRY_REVERT_REMOVED => RevertKind::Removed,
                sys::FERRY_REVERT_CHANGED => RevertKind::Changed,
                sys::FERRY_REVERT_RESTORED => RevertKind::Restored,
                other => RevertKind::Unknown(other),
            },
            values: values
                .iter()
                .map(|v| RevertedValue {
                    name: string_from(v.name).unwrap_or_default(),
                    value: value_or_null(&v.value),
                    list: v.is_list.then(|| {
                        if v.list.is_null() {
                            Vec::new()
                        } else {
                            std::slice::from_raw_parts(v.list, v.list_count)
                                .iter()
                                .map(value_or_null)
                                .collect()
                        }
                    }),
                })
                .collect(),
            writes: writes
                .iter()
                .map(|w| LocalWrite {
                    local_version: w.local_version,
                    kind: match w.kind {
                        sys::FERRY_WRITE_CREATE => WriteKind::Create,
                        sys::FERRY_WRITE_DELETE => WriteKind::Delete,
                        sys::FERRY_WRITE_SET => WriteKind::Set,
                        sys::FERRY_WRITE_ADD_INT => WriteKind::AddInt,
                        sys::FERRY_WRITE_LIST_INSERT => WriteKind::ListInsert,
                        sys::FERRY_WRITE_LIST_SET => WriteKind::ListSet,
                        sys::FERRY_WRITE_LIST_ERASE => WriteKind::ListErase,
                        sys::FERRY_WRITE_LIST_CLEAR => WriteKind::ListClear,
                        other => WriteKind::Unknown(other),
                    },
                    property: string_from(w.property),
                    value: value_or_null(&w.value),
                    index: w.index,
                })
                .collect(),
            raw,
        })
    }

    /// The device's value of a property before the revert, if the revert changed it.
    pub fn value(&self, property: &str) -> Option<&RevertedValue> {
        self.values.iter().find(|v| v.name == property)
    }

    pub(crate) fn raw(&self) -> *const sys::ferry_reverted_object_t {
        self.raw.as_ptr()
    }

    /// Checks a return code (kept here so `db.rs` needs no knowledge of the record).
    pub(crate) fn check(code: std::os::raw::c_int) -> Result<()> {
        Error::check(code)
    }
}
