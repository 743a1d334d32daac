import CFerry
import FerryCore

/// The object behind a `ferry_object_t *`: a snapshot of one object's values with their C
/// views, which live as long as the handle.
final class ObjectHandle {
    let classIndex: UInt32
    let objectSchema: ObjectSchema
    private let storage = CValueStorage()
    private var scalars: [ferry_value_t] = []
    private var lists: [(UnsafePointer<ferry_value_t>?, Int)] = []

    init(classIndex: UInt32, objectSchema: ObjectSchema, values: [FerryValue]) {
        self.classIndex = classIndex
        self.objectSchema = objectSchema
        for v in values {
            if case .list(let items) = v {
                scalars.append(ferry_value_t())
                lists.append((storage.cArray(items), items.count))
            } else {
                scalars.append(storage.cValue(v))
                lists.append((nil, 0))
            }
        }
    }

    private func property(_ index: UInt32) throws -> Property {
        guard Int(index) < objectSchema.properties.count else {
            throw FerryError(.noSuchProperty, "class '\(objectSchema.name)' has no property with key \(index)")
        }
        return objectSchema.properties[Int(index)]
    }

    func value(_ index: UInt32) throws -> ferry_value_t {
        let p = try property(index)
        guard !p.isList else { throw FerryError(.wrongType, "'\(objectSchema.name).\(p.name)' is a list; use ferry_object_get_list") }
        return scalars[Int(index)]
    }

    func list(_ index: UInt32) throws -> (UnsafePointer<ferry_value_t>?, Int) {
        let p = try property(index)
        guard p.isList else { throw FerryError(.wrongType, "'\(objectSchema.name).\(p.name)' is \(p.typeText), not a list") }
        return lists[Int(index)]
    }
}

/// The object behind a `ferry_results_t *`: the matching objects' values as of the query.
final class ResultsHandle {
    let classIndex: UInt32
    let objectSchema: ObjectSchema
    let rows: [[FerryValue]]
    init(classIndex: UInt32, objectSchema: ObjectSchema, rows: [[FerryValue]]) {
        self.classIndex = classIndex
        self.objectSchema = objectSchema
        self.rows = rows
    }
}
