//! Values of properties, primary keys and query arguments.

use std::fmt;
use std::marker::PhantomData;
use std::os::raw::c_char;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, ErrorCode, Result};
use crate::sys;

/// One value of any property type (`ferry_value_t`), owned by Rust.
///
/// Values read from the database are copied out of the library's lent memory, so a `Value`
/// lives independently of the object, results or change set it came from. A link property is
/// read and written as the primary key of its target.
///
/// Most Rust types convert with `into()`:
///
/// ```
/// use ferry::{ObjectId, Value};
/// assert_eq!(Value::from(4), Value::Int(4));
/// assert_eq!(Value::from("a"), Value::String("a".into()));
/// assert_eq!(Value::from(None::<i64>), Value::Null);
/// let id = ObjectId::from_bytes([1; 12]);
/// assert_eq!(Value::from(id), Value::ObjectId(id));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Null (an optional property without a value).
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float.
    Double(f64),
    /// A UTF-8 string.
    String(String),
    /// Bytes.
    Binary(Vec<u8>),
    /// An instant: seconds since the Unix epoch plus nanoseconds in `0..1_000_000_000`
    /// (before the epoch, `seconds` is negative and `nanoseconds` still counts forward).
    Timestamp {
        /// Seconds since the Unix epoch.
        seconds: i64,
        /// Nanoseconds after `seconds`, in `0..1_000_000_000`.
        nanoseconds: i32,
    },
    /// A 12-byte ObjectId.
    ObjectId(ObjectId),
    /// A 16-byte UUID.
    Uuid([u8; 16]),
}

impl Value {
    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The boolean, if this is a `Bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The integer, if this is an `Int`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The float, if this is a `Double`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Double(d) => Some(d),
            _ => None,
        }
    }

    /// The string, if this is a `String`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes, if this is a `Binary`.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Binary(b) => Some(b),
            _ => None,
        }
    }

    /// The ObjectId, if this is an `ObjectId`.
    pub fn as_object_id(&self) -> Option<ObjectId> {
        match *self {
            Value::ObjectId(id) => Some(id),
            _ => None,
        }
    }

    /// The UUID bytes, if this is a `Uuid`.
    pub fn as_uuid(&self) -> Option<[u8; 16]> {
        match *self {
            Value::Uuid(u) => Some(u),
            _ => None,
        }
    }

    /// The instant, if this is a `Timestamp` that `SystemTime` can represent.
    pub fn as_system_time(&self) -> Option<SystemTime> {
        match *self {
            Value::Timestamp { seconds, nanoseconds } => {
                let nanos = Duration::from_nanos(u64::try_from(nanoseconds).ok()?);
                if seconds >= 0 {
                    UNIX_EPOCH.checked_add(Duration::from_secs(seconds as u64))?.checked_add(nanos)
                } else {
                    UNIX_EPOCH
                        .checked_sub(Duration::from_secs(seconds.unsigned_abs()))?
                        .checked_add(nanos)
                }
            }
            _ => None,
        }
    }

    /// The name of the value's type, as in `ferry.h` (`"int"`, `"string"`...).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Double(_) => "double",
            Value::String(_) => "string",
            Value::Binary(_) => "binary",
            Value::Timestamp { .. } => "timestamp",
            Value::ObjectId(_) => "objectId",
            Value::Uuid(_) => "uuid",
        }
    }

    /// A `ferry_value_t` that borrows this value's string or binary data.
    pub(crate) fn raw(&self) -> RawValue<'_> {
        let mut raw = sys::ferry_value_t::zeroed();
        match self {
            Value::Null => raw.type_ = sys::FERRY_TYPE_NULL,
            Value::Bool(b) => {
                raw.type_ = sys::FERRY_TYPE_BOOL;
                raw.u.b = *b;
            }
            Value::Int(i) => {
                raw.type_ = sys::FERRY_TYPE_INT;
                raw.u.i = *i;
            }
            Value::Double(d) => {
                raw.type_ = sys::FERRY_TYPE_DOUBLE;
                raw.u.d = *d;
            }
            Value::String(s) => {
                raw.type_ = sys::FERRY_TYPE_STRING;
                raw.u.string =
                    sys::ferry_value_string { data: s.as_ptr() as *const c_char, size: s.len() };
            }
            Value::Binary(b) => {
                raw.type_ = sys::FERRY_TYPE_BINARY;
                raw.u.binary = sys::ferry_value_binary { data: b.as_ptr(), size: b.len() };
            }
            Value::Timestamp { seconds, nanoseconds } => {
                raw.type_ = sys::FERRY_TYPE_TIMESTAMP;
                raw.u.timestamp =
                    sys::ferry_value_timestamp { seconds: *seconds, nanoseconds: *nanoseconds };
            }
            Value::ObjectId(id) => {
                raw.type_ = sys::FERRY_TYPE_OBJECT_ID;
                raw.u.object_id = id.0;
            }
            Value::Uuid(u) => {
                raw.type_ = sys::FERRY_TYPE_UUID;
                raw.u.uuid = *u;
            }
        }
        RawValue { raw, _borrow: PhantomData }
    }

    /// Copies a value out of a `ferry_value_t` handed out by libferry.
    ///
    /// # Safety
    /// A string or binary value's `data` must point to `size` readable bytes (or be NULL with
    /// size 0).
    pub(crate) unsafe fn from_raw(raw: &sys::ferry_value_t) -> Result<Value> {
        Ok(match raw.type_ {
            sys::FERRY_TYPE_NULL => Value::Null,
            // Read the byte rather than the `bool` member: any non-zero byte is true, and a
            // byte other than 0 or 1 must not become an invalid Rust `bool`.
            sys::FERRY_TYPE_BOOL => Value::Bool(*(std::ptr::addr_of!(raw.u) as *const u8) != 0),
            sys::FERRY_TYPE_INT => Value::Int(raw.u.i),
            sys::FERRY_TYPE_DOUBLE => Value::Double(raw.u.d),
            sys::FERRY_TYPE_STRING => {
                let s = raw.u.string;
                let bytes = lent_bytes(s.data as *const u8, s.size);
                Value::String(String::from_utf8_lossy(bytes).into_owned())
            }
            sys::FERRY_TYPE_BINARY => {
                let b = raw.u.binary;
                Value::Binary(lent_bytes(b.data, b.size).to_vec())
            }
            sys::FERRY_TYPE_TIMESTAMP => Value::Timestamp {
                seconds: raw.u.timestamp.seconds,
                nanoseconds: raw.u.timestamp.nanoseconds,
            },
            sys::FERRY_TYPE_OBJECT_ID => Value::ObjectId(ObjectId(raw.u.object_id)),
            sys::FERRY_TYPE_UUID => Value::Uuid(raw.u.uuid),
            other => {
                return Err(Error::new(
                    ErrorCode::Internal,
                    format!("libferry returned a value of unknown type {other}"),
                ))
            }
        })
    }

    /// Copies `count` values out of a lent array (NULL when empty).
    ///
    /// # Safety
    /// `values` must point to `count` valid values, or `count` must be 0.
    pub(crate) unsafe fn from_raw_array(
        values: *const sys::ferry_value_t,
        count: usize,
    ) -> Result<Vec<Value>> {
        if count == 0 || values.is_null() {
            return Ok(Vec::new());
        }
        std::slice::from_raw_parts(values, count).iter().map(|v| Value::from_raw(v)).collect()
    }
}

/// A slice from a lent pointer; NULL or size 0 gives an empty slice.
unsafe fn lent_bytes<'a>(data: *const u8, size: usize) -> &'a [u8] {
    if data.is_null() || size == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(data, size)
    }
}

/// A `ferry_value_t` whose pointers borrow a [`Value`] for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct RawValue<'a> {
    raw: sys::ferry_value_t,
    _borrow: PhantomData<&'a Value>,
}

impl<'a> RawValue<'a> {
    /// The raw value; its pointers are valid only while the borrowed `Value` lives.
    pub(crate) fn get(&self) -> sys::ferry_value_t {
        self.raw
    }

    pub(crate) fn as_ptr(&self) -> *const sys::ferry_value_t {
        &self.raw
    }
}

/// Raw copies of several values, borrowing them.
pub(crate) fn raw_values(values: &[Value]) -> Vec<sys::ferry_value_t> {
    values.iter().map(|v| v.raw().get()).collect()
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value { Value::Int(i64::from(v)) }
        }
    )*};
}
from_int!(i8, i16, i32, i64, u8, u16, u32);

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Double(v)
    }
}

impl From<f32> for Value {
    fn from(v: f32) -> Value {
        Value::Double(f64::from(v))
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::String(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::String(v)
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Value {
        Value::String(v.clone())
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::Binary(v)
    }
}

impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Value {
        Value::Binary(v.to_vec())
    }
}

impl From<ObjectId> for Value {
    fn from(v: ObjectId) -> Value {
        Value::ObjectId(v)
    }
}

impl From<&ObjectId> for Value {
    fn from(v: &ObjectId) -> Value {
        Value::ObjectId(*v)
    }
}

impl From<&Value> for Value {
    fn from(v: &Value) -> Value {
        v.clone()
    }
}

impl From<SystemTime> for Value {
    fn from(t: SystemTime) -> Value {
        let (seconds, nanoseconds) = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => (d.as_secs() as i64, d.subsec_nanos() as i32),
            Err(e) => {
                // Before the epoch: seconds goes down, nanoseconds still counts forward.
                let d = e.duration();
                let (s, n) = (-(d.as_secs() as i64), d.subsec_nanos() as i32);
                if n == 0 {
                    (s, 0)
                } else {
                    (s - 1, 1_000_000_000 - n)
                }
            }
        };
        Value::Timestamp { seconds, nanoseconds }
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// A 12-byte ObjectId: 4 bytes of seconds since the epoch, then 8 bytes from the system's
/// CSPRNG, fresh for each id. Displayed (and parsed) as 24 lowercase hex digits.
///
/// ```
/// use ferry::ObjectId;
/// let id: ObjectId = "0102030405060708090a0b0c".parse().unwrap();
/// assert_eq!(id.to_string(), "0102030405060708090a0b0c");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ObjectId(pub [u8; 12]);

impl ObjectId {
    /// A new, unique ObjectId (`ferry_object_id_generate`).
    pub fn generate() -> ObjectId {
        let mut raw = sys::ferry_value_t::zeroed();
        // SAFETY: `raw` is a valid out-parameter.
        let rc = unsafe { sys::ferry_object_id_generate(&mut raw) };
        // The only documented failure is a NULL out-parameter, which cannot happen here.
        assert!(
            rc == sys::FERRY_OK && raw.type_ == sys::FERRY_TYPE_OBJECT_ID,
            "ferry_object_id_generate failed: {}",
            Error::from_last(rc)
        );
        // SAFETY: type_ says object_id is the meaningful member.
        ObjectId(unsafe { raw.u.object_id })
    }

    /// The ObjectId with these bytes.
    pub const fn from_bytes(bytes: [u8; 12]) -> ObjectId {
        ObjectId(bytes)
    }

    /// The 12 bytes.
    pub const fn bytes(&self) -> [u8; 12] {
        self.0
    }

    /// The seconds since the epoch stored in the first 4 bytes.
    pub fn timestamp(&self) -> u32 {
        u32::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({self})")
    }
}

impl FromStr for ObjectId {
    type Err = Error;

    /// Parses 24 hex digits (either case).
    fn from_str(s: &str) -> Result<ObjectId> {
        let bad = || Error::new(ErrorCode::InvalidArgument, format!("not an ObjectId: {s:?}"));
        let s = s.as_bytes();
        if s.len() != 24 {
            return Err(bad());
        }
        let mut out = [0u8; 12];
        for (i, pair) in s.chunks(2).enumerate() {
            let hex = std::str::from_utf8(pair).map_err(|_| bad())?;
            out[i] = u8::from_str_radix(hex, 16).map_err(|_| bad())?;
        }
        Ok(ObjectId(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_round_trip() {
        let values = [
            Value::Null,
            Value::Bool(true),
            Value::Int(-7),
            Value::Double(2.5),
            Value::String("héllo".into()),
            Value::String(String::new()),
            Value::Binary(vec![0, 1, 255]),
            Value::Timestamp { seconds: -2, nanoseconds: 5 },
            Value::ObjectId(ObjectId([9; 12])),
            Value::Uuid([7; 16]),
        ];
        for v in &values {
            let raw = v.raw();
            assert_eq!(&unsafe { Value::from_raw(&raw.get()) }.unwrap(), v);
        }
    }

    #[test]
    fn system_time_before_epoch() {
        let t = UNIX_EPOCH - Duration::from_millis(1500);
        let v = Value::from(t);
        assert_eq!(v, Value::Timestamp { seconds: -2, nanoseconds: 500_000_000 });
        assert_eq!(v.as_system_time(), Some(t));
    }

    #[test]
    fn object_id_hex() {
        assert!("zz02030405060708090a0b0c".parse::<ObjectId>().is_err());
        assert!("0102".parse::<ObjectId>().is_err());
        let id: ObjectId = "0102030405060708090A0B0C".parse().unwrap();
        assert_eq!(id.bytes()[11], 12);
    }
}
