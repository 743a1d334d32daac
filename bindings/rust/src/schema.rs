//! Schemas: the classes (object types) of a database and their properties.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::ptr::{self, NonNull};

use crate::error::{Error, ErrorCode, Result};
use crate::sys;

/// The type of a property.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PropertyType {
    /// `bool`.
    Bool,
    /// 64-bit signed integer.
    Int,
    /// 64-bit float.
    Double,
    /// UTF-8 string.
    String,
    /// Bytes.
    Binary,
    /// Seconds and nanoseconds since the Unix epoch.
    Timestamp,
    /// 12-byte ObjectId.
    ObjectId,
    /// 16-byte UUID.
    Uuid,
    /// A link to an object of another class, held as that object's primary key.
    Link,
}

impl PropertyType {
    pub(crate) fn as_raw(self) -> i32 {
        match self {
            PropertyType::Bool => sys::FERRY_TYPE_BOOL,
            PropertyType::Int => sys::FERRY_TYPE_INT,
            PropertyType::Double => sys::FERRY_TYPE_DOUBLE,
            PropertyType::String => sys::FERRY_TYPE_STRING,
            PropertyType::Binary => sys::FERRY_TYPE_BINARY,
            PropertyType::Timestamp => sys::FERRY_TYPE_TIMESTAMP,
            PropertyType::ObjectId => sys::FERRY_TYPE_OBJECT_ID,
            PropertyType::Uuid => sys::FERRY_TYPE_UUID,
            PropertyType::Link => sys::FERRY_TYPE_LINK,
        }
    }

    pub(crate) fn from_raw(raw: i32) -> Option<PropertyType> {
        Some(match raw {
            sys::FERRY_TYPE_BOOL => PropertyType::Bool,
            sys::FERRY_TYPE_INT => PropertyType::Int,
            sys::FERRY_TYPE_DOUBLE => PropertyType::Double,
            sys::FERRY_TYPE_STRING => PropertyType::String,
            sys::FERRY_TYPE_BINARY => PropertyType::Binary,
            sys::FERRY_TYPE_TIMESTAMP => PropertyType::Timestamp,
            sys::FERRY_TYPE_OBJECT_ID => PropertyType::ObjectId,
            sys::FERRY_TYPE_UUID => PropertyType::Uuid,
            sys::FERRY_TYPE_LINK => PropertyType::Link,
            _ => return None,
        })
    }
}

/// One property of a class: a builder for schemas, and what [`Database::properties`]
/// reports about an open database.
///
/// [`Database::properties`]: crate::Database::properties
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    name: String,
    ty: PropertyType,
    flags: u32,
    link_target: Option<String>,
}

impl Property {
    /// A required, unindexed, single-valued property.
    pub fn new(name: impl Into<String>, ty: PropertyType) -> Property {
        Property { name: name.into(), ty, flags: sys::FERRY_PROPERTY_NORMAL, link_target: None }
    }

    /// The primary key: a property named `_id` of type ObjectId, String, Int or Uuid.
    pub fn primary_key(ty: PropertyType) -> Property {
        Property::new("_id", ty).primary()
    }

    /// A link to an object of class `target`.
    pub fn link(name: impl Into<String>, target: impl Into<String>) -> Property {
        Property { link_target: Some(target.into()), ..Property::new(name, PropertyType::Link) }
    }

    /// Marks the property optional: it may hold [`Value::Null`](crate::Value::Null).
    pub fn optional(mut self) -> Property {
        self.flags |= sys::FERRY_PROPERTY_OPTIONAL;
        self
    }

    /// Marks the property indexed: equality and range queries on it use an index.
    pub fn indexed(mut self) -> Property {
        self.flags |= sys::FERRY_PROPERTY_INDEXED;
        self
    }

    /// Makes the property a list of its type (lists cannot be optional).
    pub fn list(mut self) -> Property {
        self.flags |= sys::FERRY_PROPERTY_LIST;
        self
    }

    /// Marks the property as the class's primary key (it must be named `_id`).
    pub fn primary(mut self) -> Property {
        self.flags |= sys::FERRY_PROPERTY_PRIMARY_KEY;
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The type.
    pub fn property_type(&self) -> PropertyType {
        self.ty
    }

    /// The target class of a link.
    pub fn link_target(&self) -> Option<&str> {
        self.link_target.as_deref()
    }

    /// Whether it may hold null.
    pub fn is_optional(&self) -> bool {
        self.flags & sys::FERRY_PROPERTY_OPTIONAL != 0
    }

    /// Whether it is the primary key.
    pub fn is_primary_key(&self) -> bool {
        self.flags & sys::FERRY_PROPERTY_PRIMARY_KEY != 0
    }

    /// Whether it is indexed.
    pub fn is_indexed(&self) -> bool {
        self.flags & sys::FERRY_PROPERTY_INDEXED != 0
    }

    /// Whether it is a list.
    pub fn is_list(&self) -> bool {
        self.flags & sys::FERRY_PROPERTY_LIST != 0
    }

    /// The raw `ferry_property_flags_t`.
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// Reads a `ferry_property_info_t` lent by libferry.
    ///
    /// # Safety
    /// Its strings must be NULL or valid NUL-terminated strings.
    pub(crate) unsafe fn from_raw(info: &sys::ferry_property_info_t) -> Result<Property> {
        let ty = PropertyType::from_raw(info.type_).ok_or_else(|| {
            Error::new(ErrorCode::Internal, format!("unknown property type {}", info.type_))
        })?;
        Ok(Property {
            name: string_from(info.name).unwrap_or_default(),
            ty,
            flags: info.flags,
            link_target: string_from(info.link_target),
        })
    }
}

/// Copies a lent C string (NULL gives None).
pub(crate) unsafe fn string_from(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        Some(CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

/// A class (object type): a name and its properties, exactly one of them the primary key.
///
/// ```
/// use ferry::{ClassSchema, Property, PropertyType};
/// let item = ClassSchema::new("Item")
///     .property(Property::primary_key(PropertyType::ObjectId))
///     .property(Property::new("ownerId", PropertyType::String).indexed())
///     .property(Property::new("complexity", PropertyType::Int))
///     .property(Property::new("tags", PropertyType::String).list());
/// assert_eq!(item.properties().len(), 4);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassSchema {
    name: String,
    properties: Vec<Property>,
    asymmetric: bool,
}

impl ClassSchema {
    /// A class with no properties yet.
    pub fn new(name: impl Into<String>) -> ClassSchema {
        ClassSchema { name: name.into(), properties: Vec::new(), asymmetric: false }
    }

    /// Adds a property.
    pub fn property(mut self, property: Property) -> ClassSchema {
        self.properties.push(property);
        self
    }

    /// Marks the class asymmetric: under sync its objects are uploaded, never downloaded.
    pub fn asymmetric(mut self) -> ClassSchema {
        self.asymmetric = true;
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The properties, in key order.
    pub fn properties(&self) -> &[Property] {
        &self.properties
    }

    /// Whether the class is asymmetric.
    pub fn is_asymmetric(&self) -> bool {
        self.asymmetric
    }
}

/// A validated schema (`ferry_schema_t`), used to open databases.
///
/// ```no_run
/// use ferry::{ClassSchema, Property, PropertyType, Schema};
/// let schema = Schema::new([ClassSchema::new("Item")
///     .property(Property::primary_key(PropertyType::ObjectId))
///     .property(Property::new("complexity", PropertyType::Int))])?;
/// # Ok::<(), ferry::Error>(())
/// ```
#[derive(Debug)]
pub struct Schema {
    raw: NonNull<sys::ferry_schema_t>,
    classes: Vec<ClassSchema>,
}

// SAFETY: libferry handles may be used from any thread; calls on them are serialised.
unsafe impl Send for Schema {}
unsafe impl Sync for Schema {}

impl Schema {
    /// Validates and builds a schema (`ferry_schema_new`). Fails with
    /// [`ErrorCode::InvalidSchema`] whose message names the class and property.
    pub fn new(classes: impl IntoIterator<Item = ClassSchema>) -> Result<Schema> {
        let classes: Vec<ClassSchema> = classes.into_iter().collect();

        // C strings first, so the raw structs below can borrow them.
        let cstr = |s: &str, what: &str| {
            CString::new(s).map_err(|_| {
                Error::new(ErrorCode::InvalidSchema, format!("{what} {s:?} contains a NUL byte"))
            })
        };
        let mut class_names = Vec::with_capacity(classes.len());
        let mut prop_strings = Vec::with_capacity(classes.len());
        for class in &classes {
            class_names.push(cstr(&class.name, "class name")?);
            let mut props = Vec::with_capacity(class.properties.len());
            for p in &class.properties {
                let name = cstr(&p.name, &format!("property name in class {:?}:", class.name))?;
                let target = match &p.link_target {
                    Some(t) => Some(cstr(t, "link target")?),
                    None => None,
                };
                props.push((name, target));
            }
            prop_strings.push(props);
        }

        let raw_props: Vec<Vec<sys::ferry_property_info_t>> = classes
            .iter()
            .zip(&prop_strings)
            .map(|(class, strings)| {
                class
                    .properties
                    .iter()
                    .zip(strings)
                    .map(|(p, (name, target))| sys::ferry_property_info_t {
                        name: name.as_ptr(),
                        type_: p.ty.as_raw(),
                        flags: p.flags,
                        link_target: target.as_ref().map_or(ptr::null(), |t| t.as_ptr()),
                    })
                    .collect()
            })
            .collect();
        let raw_classes: Vec<sys::ferry_class_info_t> = classes
            .iter()
            .zip(&class_names)
            .zip(&raw_props)
            .map(|((class, name), props)| sys::ferry_class_info_t {
                name: name.as_ptr(),
                properties: props.as_ptr(),
                property_count: props.len(),
                flags: if class.asymmetric {
                    sys::FERRY_CLASS_ASYMMETRIC
                } else {
                    sys::FERRY_CLASS_NORMAL
                },
            })
            .collect();

        let mut out = ptr::null_mut();
        // SAFETY: every pointer in raw_classes points into vectors and CStrings alive for the
        // duration of the call; the schema copies what it needs.
        let rc =
            unsafe { sys::ferry_schema_new(&mut out, raw_classes.as_ptr(), raw_classes.len()) };
        Error::check(rc)?;
        let raw = NonNull::new(out).ok_or_else(|| {
            Error::new(ErrorCode::Internal, "ferry_schema_new succeeded but returned NULL")
        })?;
        Ok(Schema { raw, classes })
    }

    /// The classes the schema was built from.
    pub fn classes(&self) -> &[ClassSchema] {
        &self.classes
    }

    pub(crate) fn as_ptr(&self) -> *const sys::ferry_schema_t {
        self.raw.as_ptr()
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        // SAFETY: we own the schema; databases opened with it keep their own copy.
        unsafe { sys::ferry_schema_free(self.raw.as_ptr()) }
    }
}
