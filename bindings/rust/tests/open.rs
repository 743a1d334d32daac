//! Opening file and in-memory databases, schemas and their errors, closing.

mod common;

use common::*;
use ferry::{
    ClassSchema, Database, Delivery, ErrorCode, ObjectId, Options, Property, PropertyType, Schema,
    Value,
};

#[test]
fn version_matches_header() {
    assert_eq!(ferry::version(), ferry::sys::FERRY_VERSION_STRING);
    assert_eq!(ferry::version_number(), ferry::HEADER_VERSION_NUMBER);
}

#[test]
fn strerror_for_every_code() {
    assert_eq!(ErrorCode::Query.as_raw(), -13);
    assert_eq!(ErrorCode::from_raw(-13), ErrorCode::Query);
    assert_eq!(ErrorCode::from_raw(-55), ErrorCode::Unknown(-55));
    assert_eq!(ErrorCode::Unknown(-55).description(), "unknown error");
    assert_ne!(ErrorCode::Closed.description(), "unknown error");
}

#[test]
fn file_database_persists_and_reopens_with_stored_schema() {
    let dir = TempDir::new("file");
    let path = dir.file("items.ferry");
    let schema = schema();
    let id = ObjectId::generate();
    {
        let db = Database::open(&Options::path(&path).schema(&schema)).unwrap();
        assert!(!db.is_closed().unwrap());
        db.write(|tx| tx.create("Item", &[("_id", id.into()), ("itemName", "kept".into())]))
            .unwrap();
    }
    assert!(path.exists());
    // No schema: the one stored in the file is used.
    let db = Database::open(&Options::path(&path)).unwrap();
    assert_eq!(db.class_names().unwrap(), vec!["Item".to_string(), "Person".to_string()]);
    let item = db.get("Item", id).unwrap().expect("object survives reopening");
    assert_eq!(item.get("itemName").unwrap(), Value::from("kept"));
    assert_eq!(db.history_count().unwrap(), 1);
    db.verify_history().unwrap();
}

#[test]
fn two_handles_on_one_file_share_commits() {
    let dir = TempDir::new("share");
    let path = dir.file("shared.ferry");
    let schema = schema();
    let a = Database::open(&Options::path(&path).schema(&schema)).unwrap();
    let b = Database::open(&Options::path(&path).schema(&schema)).unwrap();
    let id = ObjectId::generate();
    let tx = a.begin_write().unwrap();
    tx.create("Item", &[("_id", id.into())]).unwrap();
    assert!(a.get("Item", id).unwrap().is_some(), "a handle reads its own uncommitted writes");
    assert!(b.get("Item", id).unwrap().is_none(), "other handles see the last commit");
    tx.commit().unwrap();
    assert!(b.get("Item", id).unwrap().is_some());
}

#[test]
fn new_file_without_schema_is_invalid_schema() {
    let dir = TempDir::new("noschema");
    expect_err(Database::open(&Options::path(dir.file("new.ferry"))), ErrorCode::InvalidSchema);
}

#[test]
fn missing_directory_is_io() {
    let dir = TempDir::new("nodir");
    let schema = schema();
    let path = dir.file("does-not-exist").join("x.ferry");
    expect_err(Database::open(&Options::path(path).schema(&schema)), ErrorCode::Io);
}

#[test]
fn not_a_ferry_file_is_corrupt() {
    let dir = TempDir::new("corrupt");
    let path = dir.file("garbage.ferry");
    std::fs::write(&path, vec![0x5a; 8192]).unwrap();
    let schema = schema();
    expect_err(Database::open(&Options::path(&path).schema(&schema)), ErrorCode::Corrupt);
}

#[test]
fn in_memory_handles_share_until_the_last_closes() {
    let schema = schema();
    let name = unique("shared-mem");
    let id = ObjectId::generate();
    let a = Database::open(&Options::in_memory(&name).schema(&schema)).unwrap();
    let b = Database::open(&Options::in_memory(&name).schema(&schema)).unwrap();
    a.write(|tx| tx.create("Item", &[("_id", id.into())])).unwrap();
    assert!(b.get("Item", id).unwrap().is_some(), "same identifier, same store");

    let other = Database::open(&Options::in_memory(unique("other")).schema(&schema)).unwrap();
    assert!(other.get("Item", id).unwrap().is_none(), "another identifier, another store");

    drop(a);
    drop(b);
    let c = Database::open(&Options::in_memory(&name).schema(&schema)).unwrap();
    assert!(c.get("Item", id).unwrap().is_none(), "dropped with the last handle");
}

#[test]
fn in_memory_cannot_be_synced() {
    let schema = schema();
    let result = Database::open(&Options::in_memory(unique("sync")).schema(&schema).synced(true));
    expect_err(result, ErrorCode::InvalidArgument);
}

#[test]
fn introspection() {
    let db = memory_db(Delivery::Loop);
    let props = db.properties("Item").unwrap();
    assert_eq!(props.len(), common::classes()[0].properties().len());
    assert_eq!(props[0].name(), "_id");
    assert!(props[0].is_primary_key());
    assert_eq!(props[0].property_type(), PropertyType::ObjectId);
    let owner = props.iter().find(|p| p.name() == "owner").unwrap();
    assert_eq!(owner.property_type(), PropertyType::Link);
    assert_eq!(owner.link_target(), Some("Person"));
    assert!(owner.is_optional());
    let tags = props.iter().find(|p| p.name() == "tags").unwrap();
    assert!(tags.is_list() && !tags.is_optional());
    assert!(props.iter().find(|p| p.name() == "ownerId").unwrap().is_indexed());
    expect_err(db.properties("Nope"), ErrorCode::NoSuchClass);
}

fn invalid(classes: Vec<ClassSchema>) -> String {
    expect_err(Schema::new(classes), ErrorCode::InvalidSchema)
}

fn pk() -> Property {
    Property::primary_key(PropertyType::ObjectId)
}

#[test]
fn schema_errors() {
    // No primary key.
    invalid(vec![ClassSchema::new("A").property(Property::new("x", PropertyType::Int))]);
    // Two primary keys.
    invalid(vec![ClassSchema::new("A")
        .property(pk())
        .property(Property::new("x", PropertyType::Int).primary())]);
    // A primary key not named _id.
    invalid(vec![ClassSchema::new("A").property(Property::new("id", PropertyType::Int).primary())]);
    // A primary key of a type that cannot be one.
    invalid(vec![ClassSchema::new("A").property(Property::primary_key(PropertyType::Double))]);
    // An optional primary key.
    invalid(vec![ClassSchema::new("A").property(pk().optional())]);
    // Duplicate class and property names.
    invalid(vec![ClassSchema::new("A").property(pk()), ClassSchema::new("A").property(pk())]);
    invalid(vec![ClassSchema::new("A")
        .property(pk())
        .property(Property::new("x", PropertyType::Int))
        .property(Property::new("x", PropertyType::String))]);
    // Names: empty, too long, reserved prefix.
    invalid(vec![ClassSchema::new("").property(pk())]);
    invalid(vec![ClassSchema::new("A".repeat(64)).property(pk())]);
    invalid(vec![ClassSchema::new("__A").property(pk())]);
    invalid(vec![ClassSchema::new("A")
        .property(pk())
        .property(Property::new("__x", PropertyType::Int))]);
    // A link to a class that does not exist.
    invalid(vec![ClassSchema::new("A").property(pk()).property(Property::link("b", "B"))]);
    // An optional list.
    invalid(vec![ClassSchema::new("A")
        .property(pk())
        .property(Property::new("l", PropertyType::Int).list().optional())]);
    // A NUL byte is caught before libferry.
    invalid(vec![ClassSchema::new("A\0B").property(pk())]);

    // The message names the class and property.
    let message = invalid(vec![ClassSchema::new("Widget")
        .property(pk())
        .property(Property::link("gadget", "Gadget"))]);
    assert!(message.contains("Widget"), "message {message:?} should name the class");

    // 63 bytes is fine.
    Schema::new([ClassSchema::new("A".repeat(63)).property(pk())]).unwrap();
}

#[test]
fn breaking_schema_change_is_mismatch_and_additive_change_migrates() {
    let dir = TempDir::new("migrate");
    let path = dir.file("m.ferry");
    let v1 = Schema::new([ClassSchema::new("Task")
        .property(pk())
        .property(Property::new("title", PropertyType::String))])
    .unwrap();
    let id = ObjectId::generate();
    {
        let db = Database::open(&Options::path(&path).schema(&v1)).unwrap();
        db.write(|tx| tx.create("Task", &[("_id", id.into()), ("title", "t".into())])).unwrap();
    }

    // Changed type: refused, file unchanged.
    let changed = Schema::new([ClassSchema::new("Task")
        .property(pk())
        .property(Property::new("title", PropertyType::Int))])
    .unwrap();
    expect_err(Database::open(&Options::path(&path).schema(&changed)), ErrorCode::SchemaMismatch);
    // Dropped required property: refused.
    let dropped = Schema::new([ClassSchema::new("Task").property(pk())]).unwrap();
    expect_err(Database::open(&Options::path(&path).schema(&dropped)), ErrorCode::SchemaMismatch);
    // Changed primary key type: refused.
    let new_pk = Schema::new([ClassSchema::new("Task")
        .property(Property::primary_key(PropertyType::String))
        .property(Property::new("title", PropertyType::String))])
    .unwrap();
    expect_err(Database::open(&Options::path(&path).schema(&new_pk)), ErrorCode::SchemaMismatch);

    // A new required property and a new class: migrated, existing objects get zero values.
    let v2 = Schema::new([
        ClassSchema::new("Task")
            .property(pk())
            .property(Property::new("title", PropertyType::String))
            .property(Property::new("points", PropertyType::Int))
            .property(Property::new("memo", PropertyType::String).optional()),
        ClassSchema::new("Tag").property(Property::primary_key(PropertyType::String)),
    ])
    .unwrap();
    let db = Database::open(&Options::path(&path).schema(&v2)).unwrap();
    let task = db.get("Task", id).unwrap().unwrap();
    assert_eq!(task.get("title").unwrap(), Value::from("t"));
    assert_eq!(task.get("points").unwrap(), Value::Int(0));
    assert_eq!(task.get("memo").unwrap(), Value::Null);
    assert_eq!(db.class_names().unwrap().len(), 2);
}

#[test]
fn closed_database_errors() {
    let db = memory_db(Delivery::Loop);
    let id = ObjectId::generate();
    db.write(|tx| tx.create("Item", &[("_id", id.into())])).unwrap();
    // Look up a class before closing, so the cached key is used afterwards.
    assert!(db.get("Item", id).unwrap().is_some());

    db.close().unwrap();
    db.close().unwrap(); // closing twice is allowed
    assert!(db.is_closed().unwrap());
    expect_err(db.get("Item", id), ErrorCode::Closed);
    expect_err(db.begin_write(), ErrorCode::Closed);
    expect_err(db.write(|_| Ok(())), ErrorCode::Closed);
    expect_err(db.query("Item", "TRUEPREDICATE", &[]), ErrorCode::Closed);
    expect_err(db.observe_query("Item", "TRUEPREDICATE", &[], |_| {}), ErrorCode::Closed);
    expect_err(db.history_count(), ErrorCode::Closed);
    expect_err(db.verify_history(), ErrorCode::Closed);
    expect_err(db.class_names(), ErrorCode::Closed);
    // A class not looked up before closing: find_class reports the closed handle too.
    expect_err(db.get("Person", "x"), ErrorCode::Closed);
    expect_err(db.is_in_transaction(), ErrorCode::Closed);
}

#[test]
fn close_cancels_an_open_transaction() {
    let schema = schema();
    let name = unique("closetx");
    let keep = Database::open(&Options::in_memory(&name).schema(&schema)).unwrap();
    let db = Database::open(&Options::in_memory(&name).schema(&schema)).unwrap();
    let id = ObjectId::generate();
    let tx = db.begin_write().unwrap();
    tx.create("Item", &[("_id", id.into())]).unwrap();
    db.close().unwrap();
    expect_err(tx.commit(), ErrorCode::Closed);
    assert!(keep.get("Item", id).unwrap().is_none());
    // The store's write lock was released: another handle can write.
    keep.write(|tx| tx.create("Item", &[("_id", id.into())])).unwrap();
}

#[test]
fn database_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Database>();
    assert_send_sync::<ferry::NotificationToken>();
    assert_send_sync::<Schema>();

    // Threads sharing one handle take turns with their write transactions (libferry alone
    // would fail the second begin on the handle with AlreadyInTransaction).
    let db = std::sync::Arc::new(memory_db(Delivery::Loop));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                for _ in 0..25 {
                    db.write(|tx| {
                        let before = tx.query("Item", "TRUEPREDICATE", &[])?.len();
                        let id = ObjectId::generate();
                        tx.create("Item", &[("_id", id.into())])?;
                        std::thread::yield_now();
                        // No other thread wrote meanwhile.
                        assert_eq!(tx.query("Item", "TRUEPREDICATE", &[])?.len(), before + 1);
                        tx.set("Item", id, "complexity", 1)
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(db.query("Item", "TRUEPREDICATE", &[]).unwrap().len(), 100);
    assert_eq!(db.history_count().unwrap(), 100);
    db.verify_history().unwrap();
}
