import CFerry
import FerryClient
import FerryCore
import FerryStore

// Session state, pause and resume, reconnection and progress notifiers. See ferry.h.

/// The object behind a `ferry_progress_token_t *` or a `ferry_connection_state_token_t *` (the
/// handle kinds keep them apart): the Swift token, kept alive by `cancel`, and the host's
/// userdata, freed on the loop thread once the token is cancelled.
final class SyncTokenHandle: @unchecked Sendable {
    private let cancel: (@escaping @Sendable () -> Void) -> Void
    private let userdata: CCallback
    private let userdataFree: ferry_free_fn?

    init(cancel: @escaping (@escaping @Sendable () -> Void) -> Void, userdata: CCallback, userdataFree: ferry_free_fn?) {
        self.cancel = cancel
        self.userdata = userdata
        self.userdataFree = userdataFree
    }

    func release() {
        let free = userdataFree, userdata = userdata
        cancel { free?(userdata.userdata) }
    }
}

@c @implementation
public func ferry_app_handle_client_reset(_ app: OpaquePointer!, _ token: UnsafePointer<CChar>!) -> Int32 {
    ferryCall {
        let a = try appHandle(app)
        try a.app.immediatelyHandleClientReset(token: try hostString(token, "token"))
    }
}

@c @implementation
public func ferry_app_reconnect(_ app: OpaquePointer!) -> Int32 {
    ferryCall { try appHandle(app).app.reconnect() }
}

@c @implementation
public func ferry_sync_connection_state(_ out: UnsafeMutablePointer<Int32>!, _ session: OpaquePointer!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        out.pointee = try sessionHandle(session).session.connectionState.rawValue
    }
}

@c @implementation
public func ferry_sync_session_state(_ out: UnsafeMutablePointer<Int32>!, _ session: OpaquePointer!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        out.pointee = try sessionHandle(session).session.state.rawValue
    }
}

@c @implementation
public func ferry_sync_suspend(_ session: OpaquePointer!) -> Int32 {
    ferryCall { try sessionHandle(session).session.suspend() }
}

@c @implementation
public func ferry_sync_resume(_ session: OpaquePointer!) -> Int32 {
    ferryCall { try sessionHandle(session).session.resume() }
}

/// Runs `body` with the handed-over userdata; frees it when `body` fails.
private func handingOver(_ userdata: UnsafeMutableRawPointer?, _ userdataFree: ferry_free_fn?, _ body: () throws -> Void) -> Int32 {
    var handedOver = false
    let rc = ferryCall {
        try body()
        handedOver = true
    }
    if !handedOver { userdataFree?(userdata) }
    return rc
}

@c @implementation
public func ferry_sync_observe_connection_state(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ session: OpaquePointer!,
                                               _ callback: ferry_connection_state_cb!, _ userdata: UnsafeMutableRawPointer!,
                                               _ userdataFree: ferry_free_fn!) -> Int32 {
    handingOver(userdata, userdataFree) {
        let out = try required(out, "out")
        let s = try sessionHandle(session)
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        let box = CCallback(userdata: userdata)
        let token = s.session.observeConnectionState { old, new in callback(box.userdata, old.rawValue, new.rawValue) }
        out.pointee = HandleTable.shared.register(SyncTokenHandle(cancel: token.cancel(then:), userdata: box, userdataFree: userdataFree),
                                                  kind: .connectionStateToken)
    }
}

@c @implementation
public func ferry_connection_state_token_free(_ token: OpaquePointer!) {
    HandleTable.shared.remove(token, .connectionStateToken, as: SyncTokenHandle.self)?.release()
}

@c @implementation
public func ferry_sync_observe_progress(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ session: OpaquePointer!, _ direction: Int32,
                                       _ mode: Int32, _ callback: ferry_progress_cb!, _ userdata: UnsafeMutableRawPointer!,
                                       _ userdataFree: ferry_free_fn!) -> Int32 {
    handingOver(userdata, userdataFree) {
        let out = try required(out, "out")
        let s = try sessionHandle(session)
        guard let d = ProgressDirection(rawValue: direction) else { throw FerryError(.invalidArgument, "unknown progress direction \(direction)") }
        guard let m = ProgressMode(rawValue: mode) else { throw FerryError(.invalidArgument, "unknown progress mode \(mode)") }
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        let box = CCallback(userdata: userdata)
        let token = s.session.addProgressNotifier(direction: d, mode: m) { p in
            var c = ferry_progress_t(progress_estimate: p.progressEstimate, transferred_bytes: p.transferredBytes, transferable_bytes: p.transferableBytes)
            withUnsafePointer(to: &c) { callback(box.userdata, $0) }
        }
        out.pointee = HandleTable.shared.register(SyncTokenHandle(cancel: token.cancel(then:), userdata: box, userdataFree: userdataFree),
                                                  kind: .progressToken)
    }
}

@c @implementation
public func ferry_progress_token_free(_ token: OpaquePointer!) {
    HandleTable.shared.remove(token, .progressToken, as: SyncTokenHandle.self)?.release()
}

@c @implementation
public func ferry_sync_write_copy(_ session: OpaquePointer!, _ path: UnsafePointer<CChar>!) -> Int32 {
    ferryCall {
        let s = try sessionHandle(session)
        try s.session.writeCopy(toPath: try hostString(path, "path"))
    }
}
