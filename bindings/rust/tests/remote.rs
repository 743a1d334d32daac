//! `User::remote_find` and `User::remote_count` (issue 24) against a real `ferry-server` serving
//! `Tests/Fixtures/data-api-app` (the seeds' Item app with the Data API on; owner-only rules).
//! The oracle is what the test's two users wrote; the Data API off is `examples/item-app`.

mod common;

use std::time::Duration;

use common::server::{item_schema, repo_root, Server};
use common::TempDir;
use ferry::{
    App, AppOptions, Credentials, Database, ErrorCode, Field, LogLevel, ObjectId, SyncSession,
    User, Value,
};

const APP_ID: &str = "item-app-seeds";
const TIMEOUT: Duration = Duration::from_secs(30);

struct Device {
    session: SyncSession,
    db: Database,
    user: User,
    _app: App,
    _dir: TempDir,
}

fn app(server: &Server, dir: &TempDir) -> App {
    App::new(AppOptions {
        app_id: APP_ID.into(),
        base_url: server.url.clone(),
        base_directory: dir.path().to_path_buf(),
        log_level: LogLevel::Warn,
        ..AppOptions::default()
    })
    .unwrap()
}

impl Device {
    fn new(server: &Server) -> Device {
        let dir = TempDir::new("remote-device");
        let app = app(server, &dir);
        let user = app.log_in(Credentials::Anonymous, TIMEOUT).expect("log in");
        let (session, db) =
            app.open_synced(&user, dir.file("items.ferry"), &item_schema()).unwrap();
        session.wait_for_download(TIMEOUT).expect("first download");
        let query = format!("ownerId == '{}'", user.id());
        let version = session
            .update_subscriptions(|set| {
                set.add("mine", "Item", &query);
            })
            .unwrap();
        session.wait_for_subscriptions(version, TIMEOUT).expect("subscribed");
        Device { session, db, user, _app: app, _dir: dir }
    }

    fn create(&self, id: ObjectId, name: &str, complexity: i64) {
        self.db
            .write(|tx| {
                tx.create(
                    "Item",
                    &[
                        ("_id", id.into()),
                        ("ownerId", self.user.id().into()),
                        ("itemName", name.into()),
                        ("complexity", complexity.into()),
                    ],
                )
            })
            .unwrap();
    }
}

#[test]
fn remote_find_and_count_with_the_users_rules() {
    let server = Server::start_with_admin(Some(&repo_root().join("Tests/Fixtures/data-api-app")));
    let a = Device::new(&server);
    let b = Device::new(&server);
    let ids: Vec<ObjectId> = (0..12).map(|_| ObjectId::generate()).collect();
    let complexities: Vec<i64> = (0..12)
        .map(|i| {
            if i == 0 {
                i64::MIN
            } else if i == 11 {
                i64::MAX
            } else {
                i
            }
        })
        .collect();
    for (id, c) in ids.iter().zip(&complexities) {
        a.create(*id, "line \"one\"\nline two ✓", *c);
    }
    b.create(ObjectId::generate(), "b's", 5);
    a.session.wait_for_upload(TIMEOUT).unwrap();
    b.session.wait_for_upload(TIMEOUT).unwrap();
    let history = a.db.history_count().unwrap();

    let docs = a.user.remote_find("Item", "TRUEPREDICATE", &[], 100, TIMEOUT).unwrap();
    assert_eq!(
        docs.iter().map(|d| d.get("_id").cloned()).collect::<Vec<_>>(),
        ids.iter().map(|id| Some(Value::ObjectId(*id))).collect::<Vec<_>>()
    );
    for (d, c) in docs.iter().zip(&complexities) {
        assert_eq!(d.get("complexity"), Some(&Value::Int(*c)));
        assert_eq!(d.get("itemName"), Some(&Value::String("line \"one\"\nline two ✓".into())));
        assert_eq!(d.get("ownerId"), Some(&Value::String(a.user.id().into())));
        assert_eq!(d.fields.len(), 4);
        assert!(d.json.starts_with("{\"_id\":{\"$oid\":\""), "{}", d.json);
    }
    assert!(docs[0].json.contains("\"complexity\":-9223372036854775808"), "{}", docs[0].json);
    assert!(matches!(docs[0].field("complexity"), Some(Field::Value(Value::Int(i64::MIN)))));

    let some = a
        .user
        .remote_find(
            "Item",
            "complexity > $0 AND complexity < $1",
            &[Value::Int(3), Value::Int(i64::MAX)],
            2,
            TIMEOUT,
        )
        .unwrap();
    assert_eq!(
        some.iter().map(|d| d.get("complexity").cloned()).collect::<Vec<_>>(),
        vec![Some(Value::Int(4)), Some(Value::Int(5))]
    );
    assert_eq!(a.user.remote_count("Item", "TRUEPREDICATE", &[], TIMEOUT).unwrap(), 12);
    assert_eq!(
        a.user.remote_count("Item", "complexity == $0", &[Value::Int(i64::MIN)], TIMEOUT).unwrap(),
        1
    );
    assert_eq!(b.user.remote_count("Item", "TRUEPREDICATE", &[], TIMEOUT).unwrap(), 1);
    assert!(b
        .user
        .remote_find("Item", "_id == $0", &[ids[0].into()], 10, TIMEOUT)
        .unwrap()
        .is_empty());
    // nothing stored on the device
    assert_eq!(a.db.history_count().unwrap(), history);

    let e = a.user.remote_find("Nope", "TRUEPREDICATE", &[], 10, TIMEOUT).unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchClass, "{e:?}");
    let e = a.user.remote_count("Item", "complexity >>> 1", &[], TIMEOUT).unwrap_err();
    assert_eq!(e.code, ErrorCode::Query, "{e:?}");
    let e = a.user.remote_find("Item", "TRUEPREDICATE", &[], 0, TIMEOUT).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArgument, "{e:?}");
}

#[test]
fn remote_find_with_the_data_api_off() {
    let server = Server::start();
    let dir = TempDir::new("remote-off");
    let app = app(&server, &dir);
    let user = app.log_in(Credentials::Anonymous, TIMEOUT).unwrap();
    let e = user.remote_find("Item", "TRUEPREDICATE", &[], 10, TIMEOUT).unwrap_err();
    assert_eq!(e.code, ErrorCode::Sync, "{e:?}");
    assert!(e.message.contains("DataAPIDisabled"), "{e:?}");
}
