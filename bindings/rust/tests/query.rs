//! Queries: arguments, operators, SORT and LIMIT, results, and query errors.

mod common;

use common::*;
use ferry::{Database, Delivery, ErrorCode, ObjectId, Value};

/// Ten items: complexity 0..9, owner "alice" for even, "bob" for odd, names "item-<n>",
/// tags ["t<n % 3>"], note set on multiples of 3.
fn fixture() -> (Database, Vec<ObjectId>) {
    let db = memory_db(Delivery::Loop);
    let ids: Vec<ObjectId> = (0..10).map(|_| ObjectId::generate()).collect();
    db.write(|tx| {
        for (n, id) in ids.iter().enumerate() {
            let n = n as i64;
            tx.create(
                "Item",
                &[
                    ("_id", id.into()),
                    ("ownerId", if n % 2 == 0 { "alice" } else { "bob" }.into()),
                    ("itemName", format!("item-{n}").into()),
                    ("complexity", n.into()),
                    ("done", (n >= 5).into()),
                    ("price", (n as f64 / 2.0).into()),
                    ("note", if n % 3 == 0 { Some(format!("note {n}")) } else { None }.into()),
                ],
            )?;
            tx.list_push("Item", id, "tags", format!("t{}", n % 3))?;
        }
        Ok(())
    })
    .unwrap();
    (db, ids)
}

fn complexities(db: &Database, query: &str, args: &[Value]) -> Vec<i64> {
    let results = db.query("Item", query, args).unwrap_or_else(|e| panic!("{query}: {e}"));
    results.values("complexity").unwrap().iter().map(|v| v.as_i64().unwrap()).collect()
}

fn sorted(mut v: Vec<i64>) -> Vec<i64> {
    v.sort();
    v
}

#[test]
fn query_with_arguments() {
    let (db, _) = fixture();
    let results = db.query("Item", "complexity <= $0", &[Value::Int(4)]).unwrap();
    assert_eq!(results.len(), 5);
    assert!(!results.is_empty());
    assert_eq!(results.iter().len(), 5);
    for object in &results {
        let object = object.unwrap();
        assert!(object.get("complexity").unwrap().as_i64().unwrap() <= 4);
    }
    assert_eq!(
        sorted(complexities(&db, "ownerId == $0 AND complexity > $1", &["alice".into(), 2.into()])),
        vec![4, 6, 8]
    );
    assert_eq!(
        sorted(complexities(
            &db,
            "itemName == $0 OR complexity == $1",
            &["item-7".into(), 1.into()]
        )),
        vec![1, 7]
    );
}

#[test]
fn operators() {
    let (db, ids) = fixture();
    let q = |query: &str| sorted(complexities(&db, query, &[]));
    assert_eq!(q("complexity == 3"), vec![3]);
    assert_eq!(q("complexity != 3").len(), 9);
    assert_eq!(q("complexity < 2"), vec![0, 1]);
    assert_eq!(q("complexity >= 8"), vec![8, 9]);
    assert_eq!(q("price > 3.5"), vec![8, 9]);
    assert_eq!(q("done == true AND complexity < 7"), vec![5, 6]);
    assert_eq!(q("itemName BEGINSWITH \"item-1\""), vec![1]);
    assert_eq!(q("itemName ENDSWITH \"-2\""), vec![2]);
    assert_eq!(q("itemName CONTAINS \"m-5\""), vec![5]);
    assert_eq!(q("itemName BEGINSWITH[c] \"ITEM-9\""), vec![9]);
    assert_eq!(q("itemName BEGINSWITH \"ITEM\"").len(), 0);
    assert_eq!(q("itemName LIKE \"item-?\"").len(), 10);
    assert_eq!(q("complexity IN {1, 3, 5}"), vec![1, 3, 5]);
    assert_eq!(q("NOT (complexity > 1)"), vec![0, 1]);
    assert_eq!(q("(complexity < 2 OR complexity > 7) AND ownerId == \"bob\""), vec![1, 9]);
    assert_eq!(q("TRUEPREDICATE").len(), 10);
    assert_eq!(q("FALSEPREDICATE").len(), 0);
    assert_eq!(q("note == nil"), vec![1, 2, 4, 5, 7, 8]);
    assert_eq!(q("note != null"), vec![0, 3, 6, 9]);
    assert_eq!(q("ANY tags == \"t1\""), vec![1, 4, 7]);
    assert_eq!(q("tags.@count == 1").len(), 10);

    // Arguments of every key type.
    assert_eq!(complexities(&db, "_id == $0", &[ids[6].into()]), vec![6]);
    assert_eq!(complexities(&db, "note == $0", &[Value::Null]).len(), 6);
}

#[test]
fn sort_and_limit() {
    let (db, _) = fixture();
    assert_eq!(
        complexities(&db, "TRUEPREDICATE SORT(complexity DESC) LIMIT(3)", &[]),
        vec![9, 8, 7]
    );
    assert_eq!(
        complexities(&db, "complexity < $0 SORT(ownerId ASC, complexity DESC)", &[6.into()]),
        vec![4, 2, 0, 5, 3, 1]
    );
    assert_eq!(
        complexities(&db, "ownerId == \"bob\" SORT(complexity ASC) LIMIT(2)", &[]),
        vec![1, 3]
    );
    assert_eq!(complexities(&db, "TRUEPREDICATE LIMIT(0)", &[]), Vec::<i64>::new());
}

#[test]
fn results_are_a_snapshot() {
    let (db, ids) = fixture();
    let results = db.query("Item", "complexity <= 1 SORT(complexity ASC)", &[]).unwrap();
    db.write(|tx| tx.delete("Item", ids[0])).unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results.get(0).unwrap().get("complexity").unwrap(), Value::Int(0));
    expect_err(results.get(2), ErrorCode::OutOfRange);
    assert_eq!(db.query("Item", "complexity <= 1", &[]).unwrap().len(), 1);
}

#[test]
fn bad_queries_are_query_errors() {
    let (db, _) = fixture();
    for bad in [
        "complexity <=",
        "complexity <== 4",
        "(complexity == 1",
        "complexity == \"unterminated",
        "nosuchproperty == 1",
        "complexity BEGINSWITH 1 AND",
        "TRUEPREDICATE SORT(nosuch ASC)",
        "",
        "complexity == 1 LIMIT(-1)",
    ] {
        let args = [Value::Int(1)];
        let message = expect_err(db.query("Item", bad, &args), ErrorCode::Query);
        assert!(!message.is_empty(), "{bad:?}");
    }
    // The message gives the position.
    let message = expect_err(db.query("Item", "complexity <= 4 AND AND", &[]), ErrorCode::Query);
    assert!(message.chars().any(|c| c.is_ascii_digit()), "no offset in {message:?}");
    // An argument that was not given.
    expect_err_any(
        db.query("Item", "complexity == $3", &[Value::Int(1)]),
        &[ErrorCode::Query, ErrorCode::InvalidArgument],
    );
    // Wrong argument type for the property.
    expect_err_any(
        db.query("Item", "complexity == $0", &["four".into()]),
        &[ErrorCode::Query, ErrorCode::WrongType],
    );
    expect_err(db.query("Nope", "TRUEPREDICATE", &[]), ErrorCode::NoSuchClass);
    expect_err(db.query("Item", "complexity == 1\0", &[]), ErrorCode::InvalidArgument);
}

#[test]
fn indexed_and_unindexed_give_the_same_results() {
    let (db, _) = fixture();
    // complexity is indexed, price is not: the same ranges through both.
    assert_eq!(
        sorted(complexities(&db, "complexity >= 2 AND complexity < 6", &[])),
        sorted(complexities(&db, "price >= 1.0 AND price < 3.0", &[]))
    );
}
