import FerryCore
import Hummingbird

/// The answers of the admin API's operations part, in the contract's snake_case. Optional
/// members are encoded as explicit nulls (the console tells "none" from "not sent").
extension AdminOperationsRoutes {
    struct StatsJSON: ResponseEncodable {
        var node: String
        /// "enabled", "paused" or "terminated" (as `GET sync`).
        var state: String
        var sync_enabled: Bool
        var connections: Int
        var sessions: Int
        var uploads_total: Int
        var downloads_total: Int
        var upload_bytes_total: Int
        var download_bytes_total: Int
        var compensating_writes_total: Int
        var client_resets_total: Int
        var bootstraps_total: Int
    }

    struct DeviceJSON: Encodable {
        var user_id: String
        var node: String
        var connection_id: UInt64
        var client_file: UInt64?
        var sdk: String?
        var connected_since: String
        var bytes_up: Int64
        var bytes_down: Int64
        var sessions: Int

        // Encoded by hand: a nil client file or SDK is an explicit null, not a missing key.
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(user_id, forKey: .user_id); try c.encode(node, forKey: .node); try c.encode(connection_id, forKey: .connection_id)
            try c.encode(client_file, forKey: .client_file); try c.encode(sdk, forKey: .sdk)
            try c.encode(connected_since, forKey: .connected_since); try c.encode(bytes_up, forKey: .bytes_up)
            try c.encode(bytes_down, forKey: .bytes_down); try c.encode(sessions, forKey: .sessions)
        }
        enum CodingKeys: String, CodingKey { case user_id, node, connection_id, client_file, sdk, connected_since, bytes_up, bytes_down, sessions }
    }
    struct DevicesJSON: ResponseEncodable { var devices: [DeviceJSON] }

    struct EntryJSON: Encodable {
        var id: Int64
        var time: String
        var kind: String
        var user_id: String
        var node: String
        var connection_id: UInt64
        var message: String
        var details: JSON
    }
    struct SyncLogJSON: ResponseEncodable {
        var entries: [EntryJSON]
        var next: Int64?
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(entries, forKey: .entries); try c.encode(next, forKey: .next)
        }
        enum CodingKeys: String, CodingKey { case entries, next }
    }

    struct RejectedJSON: Encodable {
        var id: Int64
        var time: String
        var user_id: String
        var object_type: String
        var primary_key: String
        var reason: String
        var rule: String
        var role: String?
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id); try c.encode(time, forKey: .time); try c.encode(user_id, forKey: .user_id)
            try c.encode(object_type, forKey: .object_type); try c.encode(primary_key, forKey: .primary_key); try c.encode(reason, forKey: .reason)
            try c.encode(rule, forKey: .rule); try c.encode(role, forKey: .role)
        }
        enum CodingKeys: String, CodingKey { case id, time, user_id, object_type, primary_key, reason, rule, role }
    }
    struct RejectedListJSON: ResponseEncodable {
        var entries: [RejectedJSON]
        var next: Int64?
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(entries, forKey: .entries); try c.encode(next, forKey: .next)
        }
        enum CodingKeys: String, CodingKey { case entries, next }
    }
}
