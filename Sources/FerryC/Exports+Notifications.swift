import CFerry
import FerryCore
import FerryStore

// Change notifications and their delivery. See ferry.h.

/// The object behind a `ferry_notification_token_t *`: the observer and the host's userdata,
/// whose free function runs exactly once, when the token is freed.
final class TokenHandle: @unchecked Sendable {
    let observer: ChangeObserver
    weak var database: Database?
    let userdata: UnsafeMutableRawPointer?
    let userdataFree: ferry_free_fn?

    init(observer: ChangeObserver, database: Database, userdata: UnsafeMutableRawPointer?, userdataFree: ferry_free_fn?) {
        self.observer = observer
        self.database = database
        self.userdata = userdata
        self.userdataFree = userdataFree
    }

    func release() {
        observer.cancel()
        database?.forget(observer)
        userdataFree?(userdata)
    }
}

/// A C callback and its userdata, carried into the observer's closure.
private struct CallbackBox: @unchecked Sendable {
    let callback: ferry_change_cb
    let userdata: UnsafeMutableRawPointer?
}

private func deliver(_ summary: ChangeSummary, _ box: CallbackBox) {
    let storage = CValueStorage()
    var cs = ferry_change_set_t()
    cs.inserted = storage.cArray(summary.inserted); cs.inserted_count = summary.inserted.count
    cs.deleted = storage.cArray(summary.deleted); cs.deleted_count = summary.deleted.count
    cs.modified = storage.cArray(summary.modified); cs.modified_count = summary.modified.count
    let props = summary.modifiedProperties.map { UInt32($0) }
    withExtendedLifetime(storage) {
        props.withUnsafeBufferPointer { buf in
            cs.modified_properties = props.isEmpty ? nil : buf.baseAddress
            cs.modified_properties_count = props.count
            withUnsafePointer(to: cs) { box.callback(box.userdata, $0) }
        }
    }
}

private func register(_ out: UnsafeMutablePointer<OpaquePointer?>?, _ db: OpaquePointer?, _ callback: ferry_change_cb?,
                      _ userdata: UnsafeMutableRawPointer?, _ userdataFree: ferry_free_fn?,
                      _ make: (Database, @escaping (ChangeSummary) -> Void) throws -> ChangeObserver) -> Int32 {
    var registered = false
    let rc = ferryCall {
        let out = try required(out, "out")
        let h = try databaseHandle(db)
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        let box = CallbackBox(callback: callback, userdata: userdata)
        let observer = try make(h.database) { summary in deliver(summary, box) }
        let token = TokenHandle(observer: observer, database: h.database, userdata: userdata, userdataFree: userdataFree)
        out.pointee = HandleTable.shared.register(token, kind: .token)
        registered = true
    }
    if !registered { userdataFree?(userdata) }
    return rc
}

@c @implementation
public func ferry_db_observe_query(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ db: OpaquePointer!, _ cls: UInt32, _ query: UnsafePointer<CChar>!, _ args: UnsafePointer<ferry_value_t>!, _ argCount: Int, _ callback: ferry_change_cb!, _ userdata: UnsafeMutableRawPointer!, _ userdataFree: ferry_free_fn!) -> Int32 {
    register(out, db, callback, userdata, userdataFree) { database, cb in
        let text = try hostString(query, "query")
        guard argCount >= 0 && argCount <= 10_000 else { throw FerryError(.invalidArgument, "arg_count \(argCount) is out of range") }
        let arguments = try ferryValues(args, argCount, "args")
        return try database.observeQuery(classIndex: Int(cls), query: text, arguments: arguments, callback: cb)
    }
}

@c @implementation
public func ferry_db_observe_object(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ db: OpaquePointer!, _ cls: UInt32, _ primaryKey: UnsafePointer<ferry_value_t>!, _ callback: ferry_change_cb!, _ userdata: UnsafeMutableRawPointer!, _ userdataFree: ferry_free_fn!) -> Int32 {
    register(out, db, callback, userdata, userdataFree) { database, cb in
        let key = try ferryValue(at: primaryKey, "primary_key")
        return try database.observeObject(classIndex: Int(cls), key: key, callback: cb)
    }
}

@c @implementation
public func ferry_notification_token_free(_ token: OpaquePointer!) {
    HandleTable.shared.remove(token, .token, as: TokenHandle.self)?.release()
}

@c @implementation
public func ferry_db_notification_fd(_ out: UnsafeMutablePointer<Int32>!, _ db: OpaquePointer!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out, "out")
        guard let p = h.polling else { throw FerryError(.invalidArgument, "the database delivers notifications on Ferry's loop (FERRY_DELIVERY_LOOP); it has no descriptor to poll") }
        out.pointee = p.fileDescriptor
    }
}

@c @implementation
public func ferry_db_deliver_notifications(_ outDelivered: UnsafeMutablePointer<Int>!, _ db: OpaquePointer!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        guard let p = h.polling else { throw FerryError(.invalidArgument, "the database delivers notifications on Ferry's loop (FERRY_DELIVERY_LOOP); there is nothing to deliver by hand") }
        try h.checkOpen()
        let n = p.deliver()
        outDelivered?.pointee = n
    }
}
