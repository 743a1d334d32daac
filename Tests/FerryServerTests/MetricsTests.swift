import FerryCore
import FerryServer
import Foundation
import Testing

/// `GET /metrics` (issue 14): the Prometheus text on the main port behind the admin token, or
/// on a port of its own; the counters move with a device's sync.
@Suite("Server: metrics")
struct MetricsTests {
    static func scrape(port: Int, token: String? = LiveServer.adminToken) async throws -> String {
        let response = try await LiveServer.request(port: port, "GET", "/metrics", headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:])
        try #require(WireFormat.response(response)?.status == 200, "GET /metrics: \(String(decoding: response, as: UTF8.self).prefix(300))")
        return try #require(WireFormat.body(response))
    }

    /// The value of one sample line (`name{labels} value`).
    static func value(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    @Test func countersMoveWithASync() async throws {
        try await LiveServer.withServer { port in
            let before = try await Self.scrape(port: port)
            #expect(Self.value(before, "ferry_uploads_integrated_total") == 0)
            #expect(Self.value(before, "ferry_oldest_needed_version") == 0 && Self.value(before, "ferry_history_head_version") == 0)
            #expect(Self.value(before, "ferry_compensating_writes_total{reason=\"write_filter\"}") == 0)
            let device = try await OperationsDevice.connect(port: port, sdk: nil)
            try await device.subscribe()
            try await device.uploadWithRejections()
            var text = ""
            try await AdminCall.eventually("the write-ack histogram") {
                text = try await Self.scrape(port: port)
                return Self.value(text, "ferry_write_ack_seconds_count") == 1
            }
            #expect(text.contains("# TYPE ferry_upload_integration_seconds histogram"))
            #expect(Self.value(text, "ferry_connections") == 1)
            #expect(Self.value(text, "ferry_sessions{state=\"active\"}") == 1)
            #expect(Self.value(text, "ferry_sessions{state=\"bound\"}") == 0)
            #expect(Self.value(text, "ferry_uploads_integrated_total") == 1)
            #expect(Self.value(text, "ferry_upload_integration_seconds_count") == 1)
            #expect(Self.value(text, "ferry_changesets_uploaded_total") == 1)
            #expect((Self.value(text, "ferry_changesets_downloaded_total") ?? 0) >= 1)
            #expect((Self.value(text, "ferry_upload_bytes_total") ?? 0) > 100)
            #expect((Self.value(text, "ferry_download_bytes_total") ?? 0) > 0)
            #expect(Self.value(text, "ferry_compensating_writes_total{reason=\"write_filter\"}") == 1)
            #expect(Self.value(text, "ferry_compensating_writes_total{reason=\"query_view\"}") == 1)
            #expect(Self.value(text, "ferry_bootstraps_total") == 1)
            #expect(Self.value(text, "ferry_bootstrap_seconds_count") == 1)
            #expect((Self.value(text, "ferry_history_head_version") ?? 0) >= 1)
            // The device's file was made at head 0 and has not bound again since.
            #expect(Self.value(text, "ferry_oldest_needed_version") == 0)
            #expect(Self.value(text, "ferry_auth_total{provider=\"anon-user\",result=\"success\"}") == 1)
            #expect(Self.value(text, "ferry_auth_total{provider=\"access-token\",result=\"success\"}") == 1)
            // The embedded store has no pool nor change feed to report.
            #expect(!text.contains("ferry_db_pool") && !text.contains("ferry_change_feed_lag_seconds"))
        }
    }

    @Test func withoutClientFilesTheOldestNeededVersionIsTheHead() async throws {
        try await LiveServer.withServer { port in
            let device = try await OperationsDevice.connect(port: port, sdk: nil)
            try await device.subscribe()
            try await device.uploadWithRejections()
            let synced = try await Self.scrape(port: port)
            #expect(Self.value(synced, "ferry_oldest_needed_version") == 0)
            // An enable after a terminate forgets every client file.
            #expect(try await AdminCall.call(port: port, "POST", "/api/admin/v1/sync/terminate").status == 200)
            #expect(try await AdminCall.call(port: port, "POST", "/api/admin/v1/sync/enable").status == 200)
            let text = try await Self.scrape(port: port)
            let head = try #require(Self.value(text, "ferry_history_head_version"))
            #expect(head >= 1)
            #expect(Self.value(text, "ferry_oldest_needed_version") == head)
        }
    }

    @Test func theMainPortWantsTheAdminToken() async throws {
        try await LiveServer.withServer { port in
            for headers in [[:], ["Authorization": "Bearer wrong"]] {
                let response = try await LiveServer.request(port: port, "GET", "/metrics", headers: headers)
                #expect(WireFormat.response(response)?.status == 401)
                #expect(!String(decoding: response, as: UTF8.self).contains("ferry_"))
            }
        }
    }

    @Test func aMetricsPortServesWithoutTheToken() async throws {
        let (ports, sink) = AsyncStream.makeStream(of: Int.self)
        try await LiveServer.withServer(configure: {
            $0.metricsPort = 0
            $0.onMetricsListening = { port in
                sink.yield(port)
                sink.finish()
            }
        }) { port in
            var iterator = ports.makeAsyncIterator()
            let metricsPort = try #require(await iterator.next())
            #expect(metricsPort != port)
            _ = try await LiveServer.anonymousUser(port: port)
            let text = try await Self.scrape(port: metricsPort, token: nil)
            #expect(Self.value(text, "ferry_auth_total{provider=\"anon-user\",result=\"success\"}") == 1)
            // The main port still wants the token.
            let main = try await LiveServer.request(port: port, "GET", "/metrics")
            #expect(WireFormat.response(main)?.status == 401)
        }
    }
}
