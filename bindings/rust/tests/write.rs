//! Writing: create, upsert, set, add, delete, lists, every value type, and write errors.

mod common;

use std::time::{Duration, UNIX_EPOCH};

use common::*;
use ferry::{Delivery, ErrorCode, Field, ObjectId, Value};

#[test]
fn create_and_read_every_type() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    let other = ObjectId::generate();
    let due = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
    let uuid = [0xab; 16];
    db.write(|tx| {
        tx.create("Person", &[("_id", "ann".into()), ("age", 41.into())])?;
        tx.create(
            "Item",
            &[
                ("_id", id.into()),
                ("ownerId", "ann".into()),
                ("itemName", "héllo wörld".into()),
                ("complexity", 3.into()),
                ("done", true.into()),
                ("price", 9.75.into()),
                ("note", Value::Null),
                ("blob", vec![0u8, 1, 2, 255].into()),
                ("due", due.into()),
                ("ref", other.into()),
                ("uuid", Value::Uuid(uuid)),
                ("owner", "ann".into()),
            ],
        )
    })
    .unwrap();

    let item = db.get("Item", id).unwrap().expect("created");
    assert_eq!(item.class_name(), "Item");
    assert_eq!(item.primary_key().unwrap(), Value::ObjectId(id));
    assert_eq!(item.get("ownerId").unwrap().as_str(), Some("ann"));
    assert_eq!(item.get("itemName").unwrap(), Value::from("héllo wörld"));
    assert_eq!(item.get("complexity").unwrap(), Value::Int(3));
    assert_eq!(item.get("done").unwrap(), Value::Bool(true));
    assert_eq!(item.get("price").unwrap(), Value::Double(9.75));
    assert_eq!(item.get("note").unwrap(), Value::Null);
    assert_eq!(item.get("counter").unwrap(), Value::Null);
    assert_eq!(item.get("blob").unwrap(), Value::Binary(vec![0, 1, 2, 255]));
    assert_eq!(item.get("due").unwrap().as_system_time(), Some(due));
    assert_eq!(item.get("ref").unwrap(), Value::ObjectId(other));
    assert_eq!(item.get("uuid").unwrap(), Value::Uuid(uuid));
    assert_eq!(item.get("owner").unwrap(), Value::from("ann"), "a link reads as its target's key");
    assert_eq!(item.get_list("tags").unwrap(), Vec::<Value>::new());
    expect_err(item.get("nope"), ErrorCode::NoSuchProperty);
    expect_err(item.get("tags"), ErrorCode::WrongType);
    expect_err(item.get_list("itemName"), ErrorCode::WrongType);

    let fields = item.fields().unwrap();
    assert_eq!(fields.len(), db.properties("Item").unwrap().len());
    assert!(fields.contains(&("tags".to_string(), Field::List(vec![]))));
    assert!(format!("{item:?}").contains("héllo wörld"));
}

#[test]
fn left_out_properties_get_zero_values() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    db.write(|tx| tx.create("Item", &[("_id", id.into())])).unwrap();
    let item = db.get("Item", id).unwrap().unwrap();
    assert_eq!(item.get("itemName").unwrap(), Value::from(""));
    assert_eq!(item.get("complexity").unwrap(), Value::Int(0));
    assert_eq!(item.get("done").unwrap(), Value::Bool(false));
    assert_eq!(item.get("price").unwrap(), Value::Double(0.0));
    assert_eq!(item.get("blob").unwrap(), Value::Binary(vec![]));
    assert_eq!(item.get("due").unwrap(), Value::Null);
    assert_eq!(item.get("owner").unwrap(), Value::Null);
}

#[test]
fn timestamps_before_the_epoch() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    let t = Value::Timestamp { seconds: -2, nanoseconds: 500_000_000 };
    db.write(|tx| tx.create("Item", &[("_id", id.into()), ("due", t.clone())])).unwrap();
    assert_eq!(db.get("Item", id).unwrap().unwrap().get("due").unwrap(), t);
}

#[test]
fn upsert_set_add_delete() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    db.write(|tx| {
        tx.upsert(
            "Item",
            &[("_id", id.into()), ("itemName", "a".into()), ("complexity", 1.into())],
        )?;
        // An upsert on an existing key sets only the given properties.
        tx.upsert("Item", &[("_id", id.into()), ("complexity", 2.into())])?;
        tx.set("Item", id, "note", "memo")?;
        tx.add_int("Item", id, "complexity", 40)?;
        tx.add_int("Item", id, "counter", 5) // a null optional counter counts as 0
    })
    .unwrap();
    let item = db.get("Item", id).unwrap().unwrap();
    assert_eq!(item.get("itemName").unwrap(), Value::from("a"));
    assert_eq!(item.get("complexity").unwrap(), Value::Int(42));
    assert_eq!(item.get("note").unwrap(), Value::from("memo"));
    assert_eq!(item.get("counter").unwrap(), Value::Int(5));

    db.write(|tx| tx.set("Item", id, "note", Value::Null)).unwrap();
    assert_eq!(db.get("Item", id).unwrap().unwrap().get("note").unwrap(), Value::Null);

    db.write(|tx| tx.delete("Item", id)).unwrap();
    assert!(db.get("Item", id).unwrap().is_none());
    expect_err(db.write(|tx| tx.delete("Item", id)), ErrorCode::NotFound);
    expect_err(db.write(|tx| tx.set("Item", id, "note", "x")), ErrorCode::NotFound);
    assert_eq!(db.history_count().unwrap(), 3, "upserts and sets, the null, the delete");
    db.verify_history().unwrap();
}

#[test]
fn add_int_overflow_is_out_of_range() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    db.write(|tx| tx.create("Item", &[("_id", id.into()), ("complexity", i64::MAX.into())]))
        .unwrap();
    expect_err(db.write(|tx| tx.add_int("Item", id, "complexity", 1)), ErrorCode::OutOfRange);
    expect_err(db.write(|tx| tx.add_int("Item", id, "itemName", 1)), ErrorCode::WrongType);
    assert_eq!(
        db.get("Item", id).unwrap().unwrap().get("complexity").unwrap(),
        Value::Int(i64::MAX)
    );
}

#[test]
fn lists() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    let tags =
        |db: &ferry::Database| db.get("Item", id).unwrap().unwrap().get_list("tags").unwrap();
    db.write(|tx| {
        tx.create("Item", &[("_id", id.into())])?;
        tx.list_insert("Item", id, "tags", 0, "b")?;
        tx.list_insert("Item", id, "tags", 0, "a")?;
        tx.list_insert("Item", id, "tags", 2, "d")?; // index == size appends
        tx.list_insert("Item", id, "tags", 2, "c")?;
        tx.list_push("Item", id, "tags", "e")
    })
    .unwrap();
    assert_eq!(tags(&db), ["a", "b", "c", "d", "e"].map(Value::from).to_vec());

    db.write(|tx| {
        tx.list_set("Item", id, "tags", 0, "A")?;
        tx.list_erase("Item", id, "tags", 1)
    })
    .unwrap();
    assert_eq!(tags(&db), ["A", "c", "d", "e"].map(Value::from).to_vec());

    expect_err(db.write(|tx| tx.list_insert("Item", id, "tags", 9, "x")), ErrorCode::OutOfRange);
    expect_err(db.write(|tx| tx.list_set("Item", id, "tags", 4, "x")), ErrorCode::OutOfRange);
    expect_err(db.write(|tx| tx.list_erase("Item", id, "tags", 4)), ErrorCode::OutOfRange);
    expect_err(db.write(|tx| tx.list_insert("Item", id, "tags", 0, 5)), ErrorCode::WrongType);
    expect_err(db.write(|tx| tx.list_insert("Item", id, "itemName", 0, "x")), ErrorCode::WrongType);
    // set on a list: the header says "not a list" without naming the code.
    expect_err_any(
        db.write(|tx| tx.set("Item", id, "tags", "x")),
        &[ErrorCode::WrongType, ErrorCode::InvalidArgument],
    );
    expect_err(
        db.write(|tx| tx.list_insert("Item", ObjectId::generate(), "tags", 0, "x")),
        ErrorCode::NotFound,
    );
    // A list cannot be given to create.
    expect_err(
        db.write(|tx| {
            tx.create("Item", &[("_id", ObjectId::generate().into()), ("tags", "x".into())])
        }),
        ErrorCode::InvalidArgument,
    );

    db.write(|tx| tx.list_clear("Item", id, "tags")).unwrap();
    assert!(tags(&db).is_empty());
    db.verify_history().unwrap();
}

#[test]
fn lists_of_links() {
    let db = memory_db(Delivery::Loop);
    db.write(|tx| {
        for name in ["a", "b", "c"] {
            tx.create("Person", &[("_id", name.into())])?;
        }
        tx.list_push("Person", "a", "friends", "b")?;
        tx.list_push("Person", "a", "friends", "c")
    })
    .unwrap();
    let a = db.get("Person", "a").unwrap().unwrap();
    assert_eq!(a.get_list("friends").unwrap(), vec![Value::from("b"), Value::from("c")]);
}

#[test]
fn write_errors() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    // Outside a transaction: the safe API has no way to write without a Transaction, so ask
    // libferry directly.
    {
        use ferry::sys;
        let pk = sys::ferry_value_t {
            type_: sys::FERRY_TYPE_OBJECT_ID,
            u: sys::ferry_value_union { object_id: id.bytes() },
        };
        let values = [sys::ferry_property_value_t { property: 0, value: pk }];
        let rc = unsafe { sys::ferry_object_create(db.as_ptr(), 0, values.as_ptr(), 1) };
        assert_eq!(rc, sys::FERRY_ERR_NOT_IN_TRANSACTION);
        let rc = unsafe { sys::ferry_object_delete(db.as_ptr(), 0, &pk) };
        assert_eq!(rc, sys::FERRY_ERR_NOT_IN_TRANSACTION);
        let error = unsafe { &*sys::ferry_error_last() };
        assert_eq!(error.code, sys::FERRY_ERR_NOT_IN_TRANSACTION);
    }

    db.write(|tx| tx.create("Item", &[("_id", id.into())])).unwrap();
    let write = |values: &[(&str, Value)]| db.write(|tx| tx.create("Item", values));
    expect_err(write(&[("_id", id.into())]), ErrorCode::DuplicatePrimaryKey);
    expect_err(write(&[("itemName", "no key".into())]), ErrorCode::InvalidArgument);
    expect_err(
        write(&[("_id", ObjectId::generate().into()), ("complexity", "three".into())]),
        ErrorCode::WrongType,
    );
    expect_err(write(&[("_id", "not an ObjectId".into())]), ErrorCode::WrongType);
    // null for a required property (the header does not name the code).
    expect_err_any(
        write(&[("_id", ObjectId::generate().into()), ("itemName", Value::Null)]),
        &[ErrorCode::WrongType, ErrorCode::InvalidArgument],
    );
    expect_err(
        write(&[("_id", ObjectId::generate().into()), ("color", "red".into())]),
        ErrorCode::NoSuchProperty,
    );
    expect_err(
        write(&[
            ("_id", ObjectId::generate().into()),
            ("done", true.into()),
            ("done", false.into()),
        ]),
        ErrorCode::InvalidArgument,
    );
    expect_err(db.write(|tx| tx.create("Nope", &[("_id", id.into())])), ErrorCode::NoSuchClass);
    // set on the primary key (the header says "not the primary key" without naming the code).
    expect_err_any(
        db.write(|tx| tx.set("Item", id, "_id", ObjectId::generate())),
        &[ErrorCode::InvalidArgument, ErrorCode::WrongType],
    );
    expect_err(db.get("Item", "wrong key type"), ErrorCode::WrongType);
    expect_err(db.get("Nope", id), ErrorCode::NoSuchClass);
    // Names with NUL bytes are caught by the binding.
    expect_err(db.get("It\0em", id), ErrorCode::InvalidArgument);

    // Nothing above was committed, but the first create.
    assert_eq!(db.query("Item", "TRUEPREDICATE", &[]).unwrap().len(), 1);
    assert_eq!(db.history_count().unwrap(), 1);
}
