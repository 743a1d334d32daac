import Dispatch

/// Long blocking reads (a scan of every object of a class) run on threads of their own, not on
/// Swift's cooperative pool, so one large view evaluation never starves the tasks that serve
/// other users.
enum BlockingReads {
    private static let queue = DispatchQueue(label: "ferry.sqlite-reads", attributes: .concurrent)

    /// Runs `body` on the read queue and waits for it. The caller is suspended meanwhile, so
    /// the non-Sendable state `body` touches is never used from two threads at once.
    static func run<T>(_ body: () throws -> T) async throws -> T {
        try await withoutActuallyEscaping(body) { body in
            let hop = Hop(body)
            return try await withCheckedThrowingContinuation { (c: CheckedContinuation<Hop<T>.Result, Error>) in
                queue.async { c.resume(with: hop.run()) }
            }.value
        }
    }
}

/// Carries a closure to the read queue and its result back. The closure is dropped on the read
/// thread before the caller resumes: it must not outlive `withoutActuallyEscaping`.
private final class Hop<T>: @unchecked Sendable {
    struct Result: @unchecked Sendable { let value: T }
    private var body: (() throws -> T)?

    init(_ body: @escaping () throws -> T) { self.body = body }

    func run() -> Swift.Result<Result, Error> {
        let result = Swift.Result { try body!() }.map(Result.init)
        body = nil
        return result
    }
}
