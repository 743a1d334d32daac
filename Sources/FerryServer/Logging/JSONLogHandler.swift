import FerryCore
import Foundation
import Logging

/// `--log-format json`: one JSON object per line on standard error, with `time` (ISO 8601,
/// UTC, milliseconds), `level`, `label`, `message`, and every metadata value as a member of
/// its own (a sync connection's lines carry `connection_id` and `user_id`). Log shippers read
/// it without a parser of our text format.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let sink: @Sendable (String) -> Void

    /// `sink` receives each line without its newline (standard error when not given).
    public init(label: String, metadataProvider: Logger.MetadataProvider? = nil, sink: (@Sendable (String) -> Void)? = nil) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.sink = sink ?? { line in JSONLogHandler.standardError.write(Data((line + "\n").utf8)) }
    }

    private static let standardError = FileHandle.standardError

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let extra = event.metadata { all.merge(extra) { _, new in new } }
        var members: [(String, JSON)] = [
            ("time", .string(ISOTime.string(milliseconds: WallClock.system.millisecondsSinceEpoch()))),
            ("level", .string(event.level.rawValue)),
            ("label", .string(label)),
            ("message", .string(event.message.description)),
        ]
        let reserved: Set<String> = ["time", "level", "label", "message"]
        for (key, value) in all.sorted(by: { $0.key < $1.key }) {
            members.append((reserved.contains(key) ? "meta_" + key : key, Self.json(value)))
        }
        sink(JSON.object(members).text)
    }

    static func json(_ value: Logger.Metadata.Value) -> JSON {
        switch value {
        case .string(let s): .string(s)
        case .stringConvertible(let c): .string(c.description)
        case .array(let list): .array(list.map(json))
        case .dictionary(let d): .object(d.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) })
        }
    }
}
