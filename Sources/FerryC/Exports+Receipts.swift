import CFerry
import FerryClient
import FerryCore
import FerryStore

// Write receipts: commit with a receipt, read its state, wait for a state. See ferry.h.

@c @implementation
public func ferry_db_commit_with_receipt(_ out_receipt: UnsafeMutablePointer<UInt64>!, _ db: OpaquePointer!) -> Int32 {
    ferryCall {
        let receipt = try databaseHandle(db).database.commit()
        if let out_receipt { out_receipt.pointee = receipt }
    }
}

@c @implementation
public func ferry_db_receipt_state(_ out_state: UnsafeMutablePointer<Int32>!, _ db: OpaquePointer!, _ receipt: UInt64) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out_state, "out_state")
        try h.checkOpen()
        out.pointee = try h.database.receiptStatus(receipt).state.rawValue
    }
}

@c @implementation
public func ferry_db_read_receipt(_ db: OpaquePointer!, _ receipt: UInt64, _ callback: ferry_receipt_cb!, _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        try h.checkOpen()
        let status = try h.database.receiptStatus(receipt)
        withReceipt(status) { callback(userdata, $0, nil) }
    }
}

@c @implementation
public func ferry_sync_wait_for_receipt(_ session: OpaquePointer!, _ receipt: UInt64, _ state: Int32, _ callback: ferry_receipt_cb!,
                                        _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    ferryCall {
        let s = try sessionHandle(session)
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        guard let target = ReceiptState(rawValue: state) else {
            throw FerryError(.invalidArgument, "unknown receipt state \(state) (FERRY_RECEIPT_LOCAL to FERRY_RECEIPT_REJECTED)")
        }
        let box = CCallback(userdata: userdata)
        try s.session.waitForReceipt(receipt, reaching: target) { result in
            switch result {
            case .success(let status): withReceipt(status) { callback(box.userdata, $0, nil) }
            case .failure(let error):
                let storage = CValueStorage()
                var e = ferry_error_t(code: error.code.rawValue, message: storage.cString(error.message))
                withExtendedLifetime(storage) { withUnsafePointer(to: &e) { callback(box.userdata, nil, $0) } }
            }
        }
    }
}

/// Calls `body` with a C view of a receipt's state, valid for the call.
func withReceipt(_ status: ReceiptStatus, _ body: (UnsafePointer<ferry_receipt_t>) -> Void) {
    let storage = CValueStorage()
    // Field by field: fields appended to the struct later keep their zero defaults here.
    var writes: [ferry_compensating_write_t] = status.compensatingWrites.map {
        var w = ferry_compensating_write_t()
        w.object_type = storage.cString($0.objectType)
        w.primary_key = storage.cValue($0.primaryKey)
        w.reason = storage.cString($0.reason)
        return w
    }
    withExtendedLifetime(storage) {
        writes.withUnsafeMutableBufferPointer { buf in
            var c = ferry_receipt_t(receipt: status.receipt, state: status.state.rawValue,
                                    compensating_writes: buf.isEmpty ? nil : UnsafePointer(buf.baseAddress), compensating_writes_count: buf.count)
            withUnsafePointer(to: &c) { body($0) }
        }
    }
}
