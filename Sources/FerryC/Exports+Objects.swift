import CFerry
import FerryCore
import FerryStore

// Writing and reading objects, and list operations. See ferry.h.

private func propertyValues(_ values: UnsafePointer<ferry_property_value_t>?, _ count: Int) throws -> [(Int, FerryValue)] {
    guard count >= 0 && count <= 100_000 else { throw FerryError(.invalidArgument, "count \(count) is out of range") }
    guard count == 0 || values != nil else { throw FerryError(.invalidArgument, "values is NULL but count is \(count)") }
    var out: [(Int, FerryValue)] = []
    out.reserveCapacity(count)
    for i in 0..<count {
        let pv = values![i]
        out.append((Int(pv.property), try ferryValue(from: pv.value, "values[\(i)]")))
    }
    return out
}

@c @implementation
public func ferry_object_create(_ db: OpaquePointer!, _ cls: UInt32, _ values: UnsafePointer<ferry_property_value_t>!, _ count: Int) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        guard count >= 0 && count <= 100_000 else { throw FerryError(.invalidArgument, "count \(count) is out of range") }
        guard count == 0 || values != nil else { throw FerryError(.invalidArgument, "values is NULL but count is \(count)") }
        // The values stay in the host's buffers: a bulk insert copies nothing into Swift.
        try withUnsafeTemporaryAllocation(of: (Int, BorrowedValue).self, capacity: count) { buf in
            var initialized = 0
            defer { _ = buf.prefix(initialized).deinitialize() }
            for i in 0..<count {
                let entry = values + i
                let borrowed: BorrowedValue
                if let offset = propertyValueOffset {
                    let value = (UnsafeRawPointer(entry) + offset).assumingMemoryBound(to: ferry_value_t.self)
                    borrowed = try borrowedValue(at: value, "values[\(i)]")
                } else {
                    borrowed = try borrowedValue(from: entry.pointee.value, "values[\(i)]")
                }
                buf.initializeElement(at: i, to: (Int(entry.pointee.property), borrowed))
                initialized += 1
            }
            try h.database.create(classIndex: Int(cls), borrowing: UnsafeBufferPointer(rebasing: buf.prefix(count)))
        }
    }
}

@c @implementation
public func ferry_object_upsert(_ db: OpaquePointer!, _ cls: UInt32, _ values: UnsafePointer<ferry_property_value_t>!, _ count: Int) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        try h.database.upsert(classIndex: Int(cls), values: try propertyValues(values, count))
    }
}

@c @implementation
public func ferry_object_set(_ db: OpaquePointer!, _ cls: UInt32, _ primaryKey: UnsafePointer<ferry_value_t>!, _ property: UInt32, _ value: UnsafePointer<ferry_value_t>!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let key = try ferryValue(at: primaryKey, "primary_key")
        let v = try ferryValue(at: value, "value")
        try h.database.set(classIndex: Int(cls), key: key, property: Int(property), value: v)
    }
}

@c @implementation
public func ferry_object_add_int(_ db: OpaquePointer!, _ cls: UInt32, _ primaryKey: UnsafePointer<ferry_value_t>!, _ property: UInt32, _ delta: Int64) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        try h.database.addInteger(classIndex: Int(cls), key: try ferryValue(at: primaryKey, "primary_key"), property: Int(property), delta: delta)
    }
}

@c @implementation
public func ferry_object_delete(_ db: OpaquePointer!, _ cls: UInt32, _ primaryKey: UnsafePointer<ferry_value_t>!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        try h.database.delete(classIndex: Int(cls), key: try ferryValue(at: primaryKey, "primary_key"))
    }
}

private func listIndex(_ index: Int) throws -> Int {
    guard index <= Int(Int32.max) else { throw FerryError(.outOfRange, "list index \(index) is out of range") }
    return index
}

@c @implementation
public func ferry_list_insert(_ db: OpaquePointer!, _ cls: UInt32, _ primaryKey: UnsafePointer<ferry_value_t>!, _ property: UInt32, _ index: Int, _ value: UnsafePointer<ferry_value_t>!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let key = try ferryValue(at: primaryKey, "primary_key")
        let v = try ferryValue(at: value, "value")
        try h.database.modifyList(classIndex: Int(cls), key: key, property: Int(property), .insert(try listIndex(index), v))
    }
}

@c @implementation
public func ferry_list_set(_ db: OpaquePointer!, _ cls: UInt32, _ primaryKey: UnsafePointer<ferry_value_t>!, _ property: UInt32, _ index: Int, _ value: UnsafePointer<ferry_value_t>!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let key = try ferryValue(at: primaryKey, "primary_key")
        let v = try ferryValue(at: value, "value")
        try h.database.modifyList(classIndex: Int(cls), key: key, property: Int(property), .set(try listIndex(index), v))
    }
}

@c @implementation
public func ferry_list_erase(_ db: OpaquePointer!, _ cls: UInt32, _ primaryKey: UnsafePointer<ferry_value_t>!, _ property: UInt32, _ index: Int) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let key = try ferryValue(at: primaryKey, "primary_key")
        try h.database.modifyList(classIndex: Int(cls), key: key, property: Int(property), .erase(try listIndex(index)))
    }
}

@c @implementation
public func ferry_list_clear(_ db: OpaquePointer!, _ cls: UInt32, _ primaryKey: UnsafePointer<ferry_value_t>!, _ property: UInt32) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let key = try ferryValue(at: primaryKey, "primary_key")
        try h.database.modifyList(classIndex: Int(cls), key: key, property: Int(property), .clear)
    }
}

@c @implementation
public func ferry_object_get(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ db: OpaquePointer!, _ cls: UInt32, _ primaryKey: UnsafePointer<ferry_value_t>!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out, "out")
        let key = try ferryValue(at: primaryKey, "primary_key")
        let os = try h.objectSchema(cls)
        guard let values = try h.database.object(classIndex: Int(cls), key: key) else {
            out.pointee = nil
            throw FerryError(.notFound, "no object of class '\(os.name)' with primary key \(key.debugText)")
        }
        out.pointee = HandleTable.shared.register(ObjectHandle(classIndex: cls, objectSchema: os, values: values), kind: .object)
    }
}

private func objectHandle(_ p: OpaquePointer?) throws -> ObjectHandle {
    try HandleTable.shared.lookup(p, .object, as: ObjectHandle.self)
}

@c @implementation
public func ferry_object_get_class(_ out: UnsafeMutablePointer<UInt32>!, _ object: OpaquePointer!) -> Int32 {
    ferryCall {
        let o = try objectHandle(object)
        try required(out, "out").pointee = o.classIndex
    }
}

@c @implementation
public func ferry_object_get_value(_ out: UnsafeMutablePointer<ferry_value_t>!, _ object: OpaquePointer!, _ property: UInt32) -> Int32 {
    ferryCall {
        let o = try objectHandle(object)
        let out = try required(out, "out")
        out.pointee = try o.value(property)
    }
}

@c @implementation
public func ferry_object_get_list(_ outValues: UnsafeMutablePointer<UnsafePointer<ferry_value_t>?>!, _ outCount: UnsafeMutablePointer<Int>!, _ object: OpaquePointer!, _ property: UInt32) -> Int32 {
    ferryCall {
        let o = try objectHandle(object)
        let values = try required(outValues, "out_values")
        let count = try required(outCount, "out_count")
        let (p, n) = try o.list(property)
        values.pointee = p
        count.pointee = n
    }
}

@c @implementation
public func ferry_object_free(_ object: OpaquePointer!) {
    _ = HandleTable.shared.remove(object, .object, as: ObjectHandle.self)
}
