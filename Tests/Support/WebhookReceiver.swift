import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// A webhook receiver for the trigger tests: a small HTTP server on 127.0.0.1 that keeps
/// every request it gets (body, headers) and answers 204, or 500 while told to fail. A test
/// waits on the requests themselves (`waitFor`), not on time.
public final class WebhookReceiver: Sendable {
    public struct Request: Sendable {
        public let body: [UInt8]
        public let signature: String?
        public let trigger: String?
        public let answered: Int
        public var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]) ?? [:] }
    }
    private struct State {
        public var requests: [Request] = []
        var failing = false
        var waiters: [(Int, CheckedContinuation<Void, Never>)] = []
    }
    private let state = Locked(State())
    private let server: Locked<Task<Void, any Error>?> = Locked(nil)

    public init() {}

    public var requests: [Request] { state.withLock { $0.requests } }
    /// The requests answered 204.
    public var delivered: [Request] { requests.filter { $0.answered == 204 } }
    public func setFailing(_ failing: Bool) { state.withLock { $0.failing = failing } }

    /// Starts listening; returns the port.
    public func start() async throws -> Int {
        let router = Router()
        router.post("hook") { [state] request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            let (status, ready) = state.withLock { s -> (Int, [CheckedContinuation<Void, Never>]) in
                let status = s.failing ? 500 : 204
                s.requests.append(Request(body: Array(buffer: body), signature: request.headers[HTTPField.Name("Ferry-Signature")!],
                                          trigger: request.headers[HTTPField.Name("Ferry-Trigger")!], answered: status))
                let due = s.waiters.filter { $0.0 <= s.requests.count }
                s.waiters.removeAll { $0.0 <= s.requests.count }
                return (status, due.map(\.1))
            }
            for c in ready { c.resume() }
            return Response(status: .init(code: status))
        }
        let (ports, sink) = AsyncStream.makeStream(of: Int.self)
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { channel in
                                  sink.yield(channel.localAddress?.port ?? 0)
                                  sink.finish()
                              })
        server.withLock { $0 = Task { try await app.runService(gracefulShutdownSignals: []) } }
        var iterator = ports.makeAsyncIterator()
        return await iterator.next() ?? 0
    }

    public func stop() async {
        let task = server.withLock { $0 }
        task?.cancel()
        _ = await task?.result
    }

    /// Waits until at least `count` requests arrived, at most `seconds`; whether they did.
    public func waitFor(_ count: Int, seconds: Double = 60) async -> Bool {
        let timeout = Task { [state] in
            // Cancelled: the requests came first, and no later wait may be woken from here.
            guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
            let all = state.withLock { s -> [CheckedContinuation<Void, Never>] in
                defer { s.waiters.removeAll() }
                return s.waiters.map(\.1)
            }
            for c in all { c.resume() }
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.requests.count >= count { return true }
                s.waiters.append((count, c))
                return false
            }
            if now { c.resume() }
        }
        timeout.cancel()
        return requests.count >= count
    }
}

/// A value behind a lock (the test support's own: it depends on no Ferry module).
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = ThreadLock()
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
