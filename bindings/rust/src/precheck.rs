//! The pre-flight check of local writes (SPEC F-PRECHECK): `ferry_precheck_mode_t` and the
//! `ferry_precheck_cb` closure of [`SyncOptions`](crate::SyncOptions).

use std::os::raw::c_void;
use std::sync::Arc;

use crate::completion::{enter_callback, guard_panic};
use crate::schema::string_from;
use crate::sync::CompensatingWrite;
use crate::sys;
use crate::value::Value;

/// What a synced database does with a write transaction its subscriptions or the write rules
/// the server published would reject (`ferry_precheck_mode_t`). Each object a commit wrote is
/// judged, as it was before and as the commit leaves it, exactly as the server will judge it:
/// against the file's latest subscription set and the rules the server last published to the
/// file (kept in the file, so the check works offline and after a restart; before any server
/// published rules, only the subscriptions are checked). The server stays the authority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PrecheckMode {
    /// No check (the default): a commit reads nothing extra.
    #[default]
    Off,
    /// The commit succeeds; the [`on_precheck`](crate::SyncOptions::on_precheck) closure gets
    /// the would-be compensating writes at once, offline too.
    Warn,
    /// The commit fails with [`ErrorCode::WriteRejected`](crate::ErrorCode::WriteRejected)
    /// (the message lists the reasons) and is rolled back; the closure gets the same list.
    Strict,
}

impl PrecheckMode {
    pub(crate) fn as_raw(self) -> i32 {
        match self {
            PrecheckMode::Off => sys::FERRY_PRECHECK_OFF,
            PrecheckMode::Warn => sys::FERRY_PRECHECK_WARN,
            PrecheckMode::Strict => sys::FERRY_PRECHECK_STRICT,
        }
    }
}

/// The closure: the would-be compensating writes of one commit and whether it was committed.
pub(crate) type PrecheckFn = dyn Fn(&[CompensatingWrite], bool) + Send + Sync;

/// Points the raw options at `callback`; the caller keeps the `Arc` alive until the session
/// opened with `raw` is freed.
pub(crate) fn fill(callback: &Arc<Box<PrecheckFn>>, raw: &mut sys::ferry_sync_options_t) {
    raw.precheck_callback = Some(precheck_trampoline);
    raw.precheck_userdata = Arc::as_ptr(callback) as *mut c_void;
}

unsafe extern "C" fn precheck_trampoline(
    userdata: *mut c_void,
    writes: *const sys::ferry_compensating_write_t,
    count: usize,
    committed: bool,
) {
    // The committing thread (inside Transaction::commit), not the loop.
    let _scope = enter_callback(false);
    if userdata.is_null() {
        return;
    }
    guard_panic("the precheck callback", || {
        // SAFETY: userdata is the content of an `Arc<Box<PrecheckFn>>` kept alive with the
        // session; the writes are lent for this call and copied first.
        let callback = &*(userdata as *const Box<PrecheckFn>);
        let raw: &[sys::ferry_compensating_write_t] = if writes.is_null() || count == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(writes, count)
        };
        let copied: Vec<CompensatingWrite> = raw
            .iter()
            .map(|w| CompensatingWrite {
                object_type: string_from(w.object_type).unwrap_or_default(),
                primary_key: Value::from_raw(&w.primary_key).unwrap_or(Value::Null),
                reason: string_from(w.reason).unwrap_or_default(),
            })
            .collect();
        callback(&copied, committed);
    });
}
