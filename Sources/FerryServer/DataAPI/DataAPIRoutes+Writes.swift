import FerryAppConfig
import FerryAuth
import FerryCore
import FerrySyncStorage
import Foundation
import HTTPTypes
import Hummingbird

/// The Data API's writes (`insertOne`, `insertMany`, `updateOne`, `deleteOne`, `transaction`):
/// each call decided into one list of instructions here, written as one changeset by
/// `BackendWrites`, merged like a device's upload.
extension DataAPIRoutes {
    struct InsertOneRequest: Decodable {
        var `class`: String
        var document: JSON
    }

    struct InsertManyRequest: Decodable {
        var `class`: String
        var documents: [JSON]
    }

    struct UpdateOneRequest: Decodable {
        var `class`: String
        var primaryKey: JSON
        var set: JSON?
        var inc: JSON?
        var push: JSON?
        var pull: JSON?
    }

    struct DeleteOneRequest: Decodable {
        var `class`: String
        var primaryKey: JSON
    }

    /// One operation of a `transaction`: `action` names it, the rest is that action's body.
    struct Operation: Decodable {
        var action: String
        var `class`: String
        var document: JSON?
        var documents: [JSON]?
        var primaryKey: JSON?
        var set: JSON?
        var inc: JSON?
        var push: JSON?
        var pull: JSON?

        /// Whether the update reads the object's lists first (`push`, `pull`).
        var readsLists: Bool { push != nil || pull != nil }
    }

    struct TransactionRequest: Decodable {
        var operations: [Operation]
    }

    /// Instructions one call may write at most (a transaction's operations together).
    static let maxInstructions = 10_000

    func addWrites(to group: RouterGroup<ServerRequestContext>) {
        route(group, .post, "insertOne") { request, context, call -> Response in
            let body = try await decode(InsertOneRequest.self, request, context)
            let (instructions, keys) = try insert([body.document], into: try objectSchema(body.class))
            let result = try await write(call, instructions)
            return Self.json(Self.object([("insertedId", keys[0].key.json), ("version", "\(result.version)")]))
        }
        route(group, .post, "insertMany") { request, context, call -> Response in
            let body = try await decode(InsertManyRequest.self, request, context)
            let (instructions, inserted) = try insert(body.documents, into: try objectSchema(body.class))
            let result = try await write(call, instructions)
            return Self.json(Self.object([("insertedIds", "[" + inserted.map(\.key.json).joined(separator: ",") + "]"), ("version", "\(result.version)")]))
        }
        route(group, .post, "updateOne") { request, context, call -> Response in
            let caller = call.caller
            let body = try await decode(UpdateOneRequest.self, request, context)
            let os = try objectSchema(body.class)
            let op = Operation(action: "updateOne", class: body.class, primaryKey: body.primaryKey, set: body.set, inc: body.inc, push: body.push, pull: body.pull)
            let (current, basedOn) = try await currentLists(of: [op])
            let (instructions, target) = try update(op, current: current)
            guard !instructions.isEmpty else {
                // Only list operations that change nothing (the object does not exist, or
                // nothing to push or pull): nothing to write.
                let matched = current?[target].map { readFilter(caller)($0, os) } ?? false
                return Self.json(Self.object([("matchedCount", matched ? "1" : "0"), ("modifiedCount", "0"), ("version", "\(basedOn ?? 0)")]))
            }
            let result = try await write(call, instructions, basedOn: basedOn)
            // Matched: it existed and the caller may read it (a user learns nothing of others').
            let matched = result.objects[target]?.before.map { readFilter(caller)($0, os) } ?? false
            return Self.json(Self.object([("matchedCount", matched ? "1" : "0"), ("modifiedCount", matched && result.objects[target]?.changed == true ? "1" : "0"),
                                          ("version", "\(result.version)")]))
        }
        route(group, .post, "deleteOne") { request, context, call -> Response in
            let body = try await decode(DeleteOneRequest.self, request, context)
            let target = try objectKey(body.class, body.primaryKey)
            let result = try await write(call, [.erase(table: target.table, key: target.key)])
            let deleted = result.objects[target]?.before != nil && result.objects[target]?.changed == true
            return Self.json(Self.object([("deletedCount", deleted ? "1" : "0"), ("version", "\(result.version)")]))
        }
        route(group, .post, "transaction") { request, context, call -> Response in
            let body = try await decode(TransactionRequest.self, request, context)
            guard !body.operations.isEmpty else { throw bad("a transaction needs at least one operation") }
            let (current, basedOn) = try await currentLists(of: body.operations)
            var instructions: [Instruction] = []
            for (n, op) in body.operations.enumerated() {
                do {
                    switch op.action {
                    case "insertOne": instructions += try insert([op.document ?? .null], into: try objectSchema(op.class)).0
                    case "insertMany": instructions += try insert(op.documents ?? [], into: try objectSchema(op.class)).0
                    case "updateOne": instructions += try update(op, current: current).0
                    case "deleteOne":
                        let target = try objectKey(op.class, op.primaryKey ?? .null)
                        instructions.append(.erase(table: target.table, key: target.key))
                    default: throw bad("unknown action '\(excerpt(op.action, limit: 40))' (insertOne, insertMany, updateOne, deleteOne)")
                    }
                } catch let e as APIError {
                    throw APIError(status: e.status, code: e.code, message: "operation \(n): \(e.message)")
                }
                guard instructions.count <= Self.maxInstructions else { throw bad("a call may write at most \(Self.maxInstructions) instructions") }
            }
            let result = try await write(call, instructions, basedOn: basedOn)
            return Self.json(Self.object([("version", "\(result.version)")]))
        }
    }

    /// Commits one changeset for the key; the schema's refusals are the caller's 400, a stopped
    /// sync a 503.
    private func write(_ call: DataAPICall, _ instructions: [Instruction], basedOn: UInt64? = nil) async throws -> BackendWriteResult {
        let caller = call.caller
        guard instructions.count <= Self.maxInstructions else { throw bad("a call may write at most \(Self.maxInstructions) instructions") }
        let result: BackendWriteResult
        do { result = try await writes.write(as: caller, instructions, basedOn: basedOn) } catch let e as SessionFailure {
            if e.code == ProtocolError.Code.compensatingWrite { throw APIError(status: .forbidden, code: "WriteRefused", message: e.message) }
            throw APIError(status: .badRequest, code: "SchemaValidationFailed", message: e.message)
        } catch let e as BackendWriteRefused {
            throw APIError(status: .serviceUnavailable, code: "SyncNotRunning", message: e.message)
        }
        guard result.compensating.isEmpty else {
            throw APIError(status: .forbidden, code: "WriteRefused", message: result.compensating.map {
                "\($0.objectType) \($0.primaryKey.keyText): \($0.reason)"
            }.joined(separator: "; "))
        }
        call.note(version: result.version, instructions: instructions.count)
        return result
    }

    private func objectKey(_ className: String, _ json: JSON) throws -> ObjectKey {
        let os = try objectSchema(className)
        do { return ObjectKey(table: os.name, key: try DataAPIValues.primaryKey(json, of: os.primaryKey.type)) } catch let e as DataAPIValues.Invalid {
            throw bad("primaryKey: \(e.message)")
        }
    }

    /// Creates of whole documents: every property of the schema given or optional, none other.
    private func insert(_ documents: [JSON], into os: ObjectSchema) throws -> ([Instruction], [ObjectKey]) {
        guard !documents.isEmpty else { throw bad("no document to insert") }
        guard documents.count <= Self.maxLimit else { throw bad("at most \(Self.maxLimit) documents per call") }
        var instructions: [Instruction] = []
        var keys: [ObjectKey] = []
        var seen: Set<FerryValue> = []
        for (n, d) in documents.enumerated() {
            guard case .object(let members) = d else { throw bad("document \(n) is not a JSON object") }
            var given: [String: FerryValue] = [:]
            for (name, json) in members {
                guard let p = os.property(named: name) else { throw bad("document \(n): '\(os.name)' has no property '\(excerpt(name, limit: 60))'") }
                do { given[name] = try DataAPIValues.field(json, for: p) } catch let e as DataAPIValues.Invalid { throw bad("document \(n), \(name): \(e.message)") }
            }
            guard let key = given[os.primaryKey.name] else { throw bad("document \(n) has no primary key '\(os.primaryKey.name)'") }
            guard seen.insert(key).inserted else { throw bad("document \(n): the primary key is given twice in this call") }
            var fields: [FieldValue] = []
            for p in os.properties where !p.isPrimaryKey {
                if let v = given[p.name] { fields.append(FieldValue(name: p.name, value: v)) } else if !p.isOptional && !p.isList && p.type != .link {
                    throw bad("document \(n): the required property '\(p.name)' is missing")
                }
            }
            instructions.append(.create(table: os.name, key: key, fields: fields))
            keys.append(ObjectKey(table: os.name, key: key))
        }
        return (instructions, keys)
    }

    /// The objects whose lists `push` and `pull` operations edit, read at one version, and
    /// that version: list positions are counted there, and the write is merged as made on
    /// it (a concurrent insert elsewhere in the list moves them, as a device's would).
    /// Nil, nil when no operation reads a list.
    private func currentLists(of operations: [Operation]) async throws -> ([ObjectKey: [FerryValue]]?, UInt64?) {
        let keys = try operations.filter { $0.action == "updateOne" && $0.readsLists }.map { try objectKey($0.class, $0.primaryKey ?? .null) }
        guard !keys.isEmpty else { return (nil, nil) }
        // The head before and after the read: equal, nothing committed between them, so
        // what was read is the state at that version. Concurrent writers may move it: a
        // few tries, then the caller is asked to try again.
        for _ in 0..<10 {
            let before = try await storage.syncState().headVersion
            let read = try await storage.objects(keys, schema: schema)
            guard try await storage.syncState().headVersion == before else { continue }
            return (read.compactMapValues { $0.object?.values }, before)
        }
        throw APIError(status: .serviceUnavailable, code: "Busy", message: "the objects changed at every read: try again")
    }

    /// `set` (values), `inc` (int deltas, which add up with concurrent ones), `push` (elements
    /// appended to a list) and `pull` (every element equal to one given, removed) on one
    /// object; `current`: the object's values as `currentLists` read them.
    private func update(_ op: Operation, current: [ObjectKey: [FerryValue]]? = nil) throws -> ([Instruction], ObjectKey) {
        let os = try objectSchema(op.class)
        let target = try objectKey(op.class, op.primaryKey ?? .null)
        var instructions: [Instruction] = []
        if let set = op.set {
            guard case .object(let members) = set else { throw bad("set is not a JSON object") }
            for (name, json) in members {
                guard let p = os.property(named: name) else { throw bad("'\(os.name)' has no property '\(excerpt(name, limit: 60))'") }
                guard !p.isPrimaryKey else { throw bad("the primary key cannot be changed") }
                do {
                    let value = try DataAPIValues.field(json, for: p)
                    if p.isList {
                        // The whole list replaced: cleared, then each element inserted in turn
                        // (list operations, merged with concurrent ones like a device's).
                        guard case .list(let items) = value else { throw DataAPIValues.Invalid("a list property takes an array") }
                        instructions.append(.listClear(table: os.name, key: target.key, field: name))
                        for (i, item) in items.enumerated() { instructions.append(.listInsert(table: os.name, key: target.key, field: name, index: i, value: item)) }
                    } else {
                        instructions.append(.set(table: os.name, key: target.key, field: name, value: value))
                    }
                } catch let e as DataAPIValues.Invalid {
                    throw bad("set.\(name): \(e.message)")
                }
            }
        }
        if let inc = op.inc {
            guard case .object(let members) = inc else { throw bad("inc is not a JSON object") }
            for (name, json) in members {
                guard let p = os.property(named: name), p.type == .int, !p.isList else { throw bad("inc.\(excerpt(name, limit: 60)): not an int property of '\(os.name)'") }
                guard case .int(let delta) = json else { throw bad("inc.\(name): the delta must be a whole number") }
                instructions.append(.addInteger(table: os.name, key: target.key, field: p.name, delta: delta))
            }
        }
        for (name, json, pushing) in [("push", op.push, true), ("pull", op.pull, false)] {
            guard let json else { continue }
            guard case .object(let members) = json else { throw bad("\(name) is not a JSON object") }
            for (field, items) in members {
                guard let i = os.propertyIndex(named: field), os.properties[i].isList else { throw bad("\(name).\(excerpt(field, limit: 60)): not a list property of '\(os.name)'") }
                let given: [FerryValue]
                do {
                    guard case .list(let values) = try DataAPIValues.field(items, for: os.properties[i]) else { throw DataAPIValues.Invalid("takes an array") }
                    given = values
                } catch let e as DataAPIValues.Invalid {
                    throw bad("\(name).\(field): \(e.message)")
                }
                // An object that does not exist has no list to edit: nothing is written.
                guard let values = current?[target], case .list(let list) = values[i] else { continue }
                if pushing {
                    for (n, item) in given.enumerated() { instructions.append(.listInsert(table: os.name, key: target.key, field: field, index: list.count + n, value: item)) }
                } else {
                    // From the end, so each index is still the element's.
                    for (n, item) in list.enumerated().reversed() where given.contains(item) {
                        instructions.append(.listErase(table: os.name, key: target.key, field: field, index: n))
                    }
                }
            }
        }
        guard !instructions.isEmpty || op.readsLists else { throw bad("updateOne needs \"set\", \"inc\", \"push\" or \"pull\"") }
        return (instructions, target)
    }
}
