import CFerry
import FerryClient
import FerryCore

// Querying the server online: ferry_remote_find, ferry_remote_count and the results. See ferry.h.

/// The object behind a `ferry_remote_results_t *`: the documents a remote find returned, with
/// C views of their texts, names and values made once, which live as long as the handle.
final class RemoteResultsHandle {
    struct Field {
        let name: UnsafePointer<CChar>
        let nameText: String
        let isList: Bool
        let value: ferry_value_t
        let list: (UnsafePointer<ferry_value_t>?, Int)
    }
    struct Document {
        let json: UnsafePointer<CChar>
        let fields: [Field]
    }
    private let storage = CValueStorage()
    let documents: [Document]

    init(_ docs: [ExtendedJSON.Document]) {
        let storage = self.storage
        documents = docs.map { d in
            Document(json: storage.cString(d.text), fields: d.fields.map { f in
                if case .list(let items) = f.value {
                    return Field(name: storage.cString(f.name), nameText: f.name, isList: true, value: ferry_value_t(), list: (storage.cArray(items), items.count))
                }
                return Field(name: storage.cString(f.name), nameText: f.name, isList: false, value: storage.cValue(f.value), list: (nil, 0))
            })
        }
    }

    func document(_ index: Int) throws -> Document {
        guard index >= 0, index < documents.count else {
            throw FerryError(.outOfRange, "index \(index) is out of range (\(documents.count) objects)")
        }
        return documents[index]
    }

    func field(_ index: Int, _ name: UnsafePointer<CChar>?) throws -> Field {
        let doc = try document(index)
        let wanted = try hostString(name, "property")
        guard let f = doc.fields.first(where: { $0.nameText == wanted }) else {
            throw FerryError(.noSuchProperty, "object \(index) of the results has no property '\(wanted)'")
        }
        return f
    }
}

func remoteResultsHandle(_ p: OpaquePointer?) throws -> RemoteResultsHandle {
    try HandleTable.shared.lookup(p, .remoteResults, as: RemoteResultsHandle.self)
}

/// The user, the query and its arguments of a remote call, checked.
private func remoteRequest(_ user: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ query: UnsafePointer<CChar>?,
                           _ args: UnsafePointer<ferry_value_t>?, _ argCount: Int) throws -> (App, SyncUser, RemoteQuery) {
    let u = try userHandle(user)
    let name = try hostString(className, "class_name")
    guard !name.isEmpty else { throw FerryError(.invalidArgument, "class_name is empty") }
    let text = try hostString(query, "query")
    let arguments = try ferryValues(args, argCount, "args")
    guard let app = u.user.app else { throw FerryError(.closed, "the user's App was freed") }
    return (app, u.user, RemoteQuery(className: name, filter: text, arguments: arguments))
}

/// Calls `body` with a C view of an error, valid for the call.
private func withCError(_ e: FerryError, _ body: (UnsafePointer<ferry_error_t>) -> Void) {
    let storage = CValueStorage()
    var err = ferry_error_t(code: e.code.rawValue, message: storage.cString(e.message))
    withExtendedLifetime(storage) { withUnsafePointer(to: &err) { body($0) } }
}

@c @implementation
public func ferry_remote_find(_ user: OpaquePointer!, _ className: UnsafePointer<CChar>!, _ query: UnsafePointer<CChar>!,
                              _ args: UnsafePointer<ferry_value_t>!, _ argCount: Int, _ limit: Int,
                              _ callback: ferry_remote_find_cb!, _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    ferryCall {
        let (app, u, q) = try remoteRequest(user, className, query, args, argCount)
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        guard limit >= 1, limit <= App.remoteFindMaxLimit else {
            throw FerryError(.invalidArgument, "limit must be between 1 and \(App.remoteFindMaxLimit), got \(limit)")
        }
        let box = CCallback(userdata: userdata)
        try app.remoteFind(user: u, q, limit: limit) { result in
            switch result {
            case .success(let docs): callback(box.userdata, HandleTable.shared.register(RemoteResultsHandle(docs), kind: .remoteResults), nil)
            case .failure(let e): withCError(e) { callback(box.userdata, nil, $0) }
            }
        }
    }
}

@c @implementation
public func ferry_remote_count(_ user: OpaquePointer!, _ className: UnsafePointer<CChar>!, _ query: UnsafePointer<CChar>!,
                               _ args: UnsafePointer<ferry_value_t>!, _ argCount: Int,
                               _ callback: ferry_remote_count_cb!, _ userdata: UnsafeMutableRawPointer!) -> Int32 {
    ferryCall {
        let (app, u, q) = try remoteRequest(user, className, query, args, argCount)
        guard let callback else { throw FerryError(.invalidArgument, "callback must not be NULL") }
        let box = CCallback(userdata: userdata)
        try app.remoteCount(user: u, q) { result in
            switch result {
            case .success(let n): callback(box.userdata, UInt64(n), nil)
            case .failure(let e): withCError(e) { callback(box.userdata, 0, $0) }
            }
        }
    }
}

@c @implementation
public func ferry_remote_results_count(_ out: UnsafeMutablePointer<Int>!, _ results: OpaquePointer!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        out.pointee = try remoteResultsHandle(results).documents.count
    }
}

@c @implementation
public func ferry_remote_results_json(_ out: UnsafeMutablePointer<UnsafePointer<CChar>?>!, _ results: OpaquePointer!, _ index: Int) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        out.pointee = try remoteResultsHandle(results).document(index).json
    }
}

@c @implementation
public func ferry_remote_results_field_count(_ out: UnsafeMutablePointer<Int>!, _ results: OpaquePointer!, _ index: Int) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        out.pointee = try remoteResultsHandle(results).document(index).fields.count
    }
}

@c @implementation
public func ferry_remote_results_field(_ outName: UnsafeMutablePointer<UnsafePointer<CChar>?>!, _ outIsList: UnsafeMutablePointer<Bool>!,
                                       _ results: OpaquePointer!, _ index: Int, _ fieldIndex: Int) -> Int32 {
    ferryCall {
        let doc = try remoteResultsHandle(results).document(index)
        guard fieldIndex >= 0, fieldIndex < doc.fields.count else {
            throw FerryError(.outOfRange, "field index \(fieldIndex) is out of range (object \(index) has \(doc.fields.count) fields)")
        }
        let f = doc.fields[fieldIndex]
        outName?.pointee = f.name
        outIsList?.pointee = f.isList
    }
}

@c @implementation
public func ferry_remote_results_get_value(_ out: UnsafeMutablePointer<ferry_value_t>!, _ results: OpaquePointer!, _ index: Int,
                                           _ property: UnsafePointer<CChar>!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        let f = try remoteResultsHandle(results).field(index, property)
        guard !f.isList else { throw FerryError(.wrongType, "'\(f.nameText)' is a list; use ferry_remote_results_get_list") }
        out.pointee = f.value
    }
}

@c @implementation
public func ferry_remote_results_get_list(_ outValues: UnsafeMutablePointer<UnsafePointer<ferry_value_t>?>!, _ outCount: UnsafeMutablePointer<Int>!,
                                          _ results: OpaquePointer!, _ index: Int, _ property: UnsafePointer<CChar>!) -> Int32 {
    ferryCall {
        let outValues = try required(outValues, "out_values")
        let outCount = try required(outCount, "out_count")
        let f = try remoteResultsHandle(results).field(index, property)
        guard f.isList else { throw FerryError(.wrongType, "'\(f.nameText)' is not a list; use ferry_remote_results_get_value") }
        outValues.pointee = f.list.0
        outCount.pointee = f.list.1
    }
}

@c @implementation
public func ferry_remote_results_free(_ results: OpaquePointer!) {
    _ = HandleTable.shared.remove(results, .remoteResults, as: RemoteResultsHandle.self)
}
