import CFerry
import FerryCore
import FerryStore

// What a compensating write took, and putting it back (SPEC F-NOLOSS). See ferry.h.

@c @implementation
public func ferry_sync_error_reverted_object(_ out: UnsafeMutablePointer<UnsafePointer<ferry_reverted_object_t>?>!,
                                             _ error: UnsafePointer<ferry_sync_error_t>!, _ index: Int) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        let error = try required(error, "error")
        guard let views = RevertedRecords.shared.lent(error) else {
            throw FerryError(.invalidArgument, "error is not a sync error lent to a running error handler")
        }
        guard index >= 0, index < views.count else {
            throw FerryError(.outOfRange, "index \(index) is past the \(views.count) compensating writes")
        }
        out.pointee = views[index].map { UnsafePointer($0.pointer) }
    }
}

/// The record behind a pointer the host passed, checked against what Ferry handed out.
private func revertedRecord(_ p: UnsafePointer<ferry_reverted_object_t>?) throws -> RevertedObject {
    let p = try required(p, "object")
    guard let view = RevertedRecords.shared.view(p) else {
        throw FerryError(.invalidArgument, "object is not a record Ferry lent (during its handler) or copied (and not freed)")
    }
    return view.object
}

@c @implementation
public func ferry_reverted_object_copy(_ out: UnsafeMutablePointer<UnsafeMutablePointer<ferry_reverted_object_t>?>!,
                                       _ object: UnsafePointer<ferry_reverted_object_t>!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        out.pointee = RevertedRecords.shared.copy(try revertedRecord(object))
    }
}

@c @implementation
public func ferry_reverted_object_free(_ object: UnsafeMutablePointer<ferry_reverted_object_t>!) {
    guard let object else { return }
    RevertedRecords.shared.free(UnsafePointer(object))
}

@c @implementation
public func ferry_db_reapply_reverted(_ db: OpaquePointer!, _ object: UnsafePointer<ferry_reverted_object_t>!,
                                      _ overrides: UnsafePointer<ferry_property_value_t>!, _ overridesCount: Int) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let record = try revertedRecord(object)
        guard overridesCount >= 0, overridesCount <= 100_000 else { throw FerryError(.invalidArgument, "overrides_count \(overridesCount) is out of range") }
        guard overridesCount == 0 || overrides != nil else { throw FerryError(.invalidArgument, "overrides is NULL but overrides_count is \(overridesCount)") }
        var values: [(Int, FerryValue)] = []
        for i in 0..<overridesCount {
            let pv = overrides[i]
            values.append((Int(pv.property), try ferryValue(from: pv.value, "overrides[\(i)]")))
        }
        try h.database.reapply(record, overriding: values)
    }
}
