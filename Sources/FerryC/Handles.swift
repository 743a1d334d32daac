import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// Every handle given to C is a retained Swift object whose address is recorded here with its
/// kind. A call validates the pointer against this table before touching it, so NULL, freed
/// and wrong-kind handles come back as FERRY_ERR_INVALID_HANDLE instead of a crash.
enum HandleKind: String {
    case schema = "schema", database = "database", object = "object", results = "results", token = "notification token"
    case app = "app", user = "user", session = "sync session", subscriptionSet = "subscription set"
    case progressToken = "progress token", connectionStateToken = "connection state token"
    case remoteResults = "remote results"
}

final class HandleTable: Sendable {
    static let shared = HandleTable()
    private let live = LockedValue<[UInt: (HandleKind, AnyObject)]>([:])

    private init() {}

    func register(_ object: AnyObject, kind: HandleKind) -> OpaquePointer {
        let raw = Unmanaged.passRetained(object).toOpaque()
        live.withLock { $0[UInt(bitPattern: raw)] = (kind, object) }
        return OpaquePointer(raw)
    }

    /// The live object behind a handle, strongly referenced for the caller's use.
    func lookup<T: AnyObject>(_ handle: OpaquePointer?, _ kind: HandleKind, as: T.Type) throws -> T {
        guard let handle else { throw FerryError(.invalidHandle, "the \(kind.rawValue) handle is NULL") }
        let entry = live.withLock { $0[UInt(bitPattern: UnsafeRawPointer(handle))] }
        guard let (k, object) = entry else { throw FerryError(.invalidHandle, "not a live Ferry handle (already freed?)") }
        guard k == kind, let typed = object as? T else {
            throw FerryError(.invalidHandle, "expected a \(kind.rawValue) handle, got a \(k.rawValue) handle")
        }
        return typed
    }

    /// Removes a handle and returns its object (nil if it was not live or of another kind).
    func remove<T: AnyObject>(_ handle: OpaquePointer?, _ kind: HandleKind, as: T.Type) -> T? {
        guard let handle else { return nil }
        let raw = UnsafeMutableRawPointer(handle)
        return live.withLock { live -> T? in
            guard let (k, object) = live[UInt(bitPattern: raw)], k == kind, let typed = object as? T else { return nil }
            live[UInt(bitPattern: raw)] = nil
            Unmanaged<AnyObject>.fromOpaque(raw).release()
            return typed
        }
    }
}
