import Crypto
import FerryAppConfig
import FerryCore
import Foundation

/// A trigger's decisions, apart from the delivering (`TriggerRunner`): which changes it
/// delivers and as what operation, the JSON a webhook receives, its signature, and how long
/// to wait after a failure. Pure functions, unit-tested without a server.
struct TriggerEvents: Sendable {
    let trigger: TriggerConfiguration
    let objectSchema: ObjectSchema
    let match: CompiledQuery?

    init(_ trigger: TriggerConfiguration, schema: Schema) throws {
        guard let os = schema.objectSchema(named: trigger.className) else {
            throw ServerStartError("trigger '\(trigger.name)': no class '\(trigger.className)' in the schema")
        }
        self.trigger = trigger
        objectSchema = os
        match = try trigger.match.map { try CompiledQuery($0, on: os) }
    }

    /// What a change was to a receiver that has every change up to `cursor`: a delete; an
    /// insert when the object was created after `cursor` (its primary key's version is its
    /// creation's: a key is never updated); else an update. The store keeps each object's
    /// last state, not every state it passed through, so an object created and then updated
    /// since `cursor` is one insert with its latest values.
    func operation(of change: DataAPIChanges.Event, after cursor: UInt64) -> TriggerConfiguration.Operation {
        guard let object = change.change.object else { return .delete }
        return object.versions[objectSchema.primaryKeyIndex] > cursor ? .insert : .update
    }

    /// Whether the trigger delivers this change: its operation is one the trigger lists and
    /// its values (a delete's last values) match the trigger's query. A delete of an object
    /// whose last values the store did not keep matches only a trigger without a query.
    func delivers(_ change: DataAPIChanges.Event, after cursor: UInt64) -> Bool {
        guard trigger.operations.contains(operation(of: change, after: cursor)) else { return false }
        guard let match else { return true }
        guard let values = change.change.object?.values ?? change.change.erasedState?.values else { return false }
        return match.matches(values)
    }

    /// The body POSTed for one change: `{"trigger", "id", "version", "operationType",
    /// "class", "documentKey": {"_id"}, "fullDocument", "by"}`; `id` (the version and the
    /// key) is the same every time the change is delivered, for a receiver to drop repeats.
    func body(_ change: DataAPIChanges.Event, after cursor: UInt64) -> [UInt8] {
        var out: [UInt8] = Array(#"{"trigger":"#.utf8)
        JSONText.appendQuoted(trigger.name, to: &out)
        var key: [UInt8] = []
        DataAPIValues.append(change.change.key, to: &key)
        out += Array(#","id":"#.utf8)
        JSONText.appendQuoted("\(change.version):" + String(decoding: key, as: UTF8.self), to: &out)
        out += Array(#","version":\#(change.version),"operationType":"#.utf8)
        JSONText.appendQuoted(operation(of: change, after: cursor).rawValue.lowercased(), to: &out)
        out += Array(#","class":"#.utf8)
        JSONText.appendQuoted(objectSchema.name, to: &out)
        out += Array(#","documentKey":{"_id":"#.utf8)
        out += key
        out += Array(#"},"fullDocument":"#.utf8)
        if let object = change.change.object { DataAPIValues.appendDocument(object.values, schema: objectSchema, to: &out) } else { out += Array("null".utf8) }
        out += Array(#","by":"#.utf8)
        change.appendBy(to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The `Ferry-Signature` header of a delivery: `t=<unix seconds>,v1=<hex>`, the HMAC-SHA256
    /// with the trigger's secret of `"<t>.<body>"` (the scheme Stripe publishes for its
    /// webhooks: the time in the signed text lets a receiver refuse old replays).
    static func signature(body: [UInt8], secret: [UInt8], time: Int64) -> String {
        var signed = Array("\(time).".utf8)
        signed += body
        let mac = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: secret))
        return "t=\(time),v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }

    /// How long to wait after the `failures`-th failure in a row: `base` doubled each time,
    /// at most `maximum`.
    static func backoff(failures: Int, base: Duration, maximum: Duration) -> Duration {
        guard failures > 1 else { return min(base, maximum) }
        let doublings = min(failures - 1, 30)
        let wait = base * (1 << doublings)
        return min(wait, maximum)
    }
}
