import FerryAuth
import FerryCore
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore

/// The sync endpoint: `GET /api/client/v2.0/app/<app id>/realm-sync` upgraded to a WebSocket
/// with the subprotocol `ferry-sync.1` and the user's access token as a Bearer header. One
/// connection carries every session of that user (docs/protocol.md).
struct SyncRoutes {
    static let subprotocol = "ferry-sync.1"
    let appId: String
    let auth: AuthService
    let hub: SyncHub
    let logger: Logger

    func add(to router: Router<BasicWebSocketRequestContext>) {
        router.ws("/api/client/v2.0/app/:app/realm-sync", shouldUpgrade: { request, context in
            guard context.parameters.get("app") == appId else {
                throw APIError(status: .notFound, code: "AppNotFound", message: "no app with that id is served here")
            }
            let offered = (request.headers[.secWebSocketProtocol] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard offered.contains(Self.subprotocol) else {
                throw APIError(status: .badRequest, code: "UnsupportedProtocol",
                               message: "the client offers sync protocol(s) \(offered); this server speaks \(Self.subprotocol)")
            }
            _ = try await user(request)
            return .upgrade([.secWebSocketProtocol: Self.subprotocol])
        }, onUpgrade: { inbound, outbound, context in
            let user = try await user(context.request)
            let outbox = await hub.openConnection(user: user.context)
            logger.info("sync connection \(outbox.id) opened for user \(user.id)")
            // The writer ends when the hub finishes the outbox (the connection is closed by the
            // server); the reader when the client goes away. Either ends the connection.
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await frame in outbox.frames {
                        do { try await outbound.write(.binary(ByteBuffer(bytes: frame))) } catch { break }
                    }
                }
                group.addTask {
                    do {
                        for try await message in inbound.messages(maxSize: ProtocolCodec.maxFrameBytes) {
                            guard case .binary(let buffer) = message else {
                                outbox.send(.error(ProtocolError(session: 0, code: 201, message: "sync messages are binary frames", tryAgain: false, action: .protocolViolation)))
                                break
                            }
                            let decoded: ProtocolMessage
                            do { decoded = try ProtocolCodec.decode(Array(buffer: buffer)) } catch {
                                outbox.send(.error(ProtocolError(session: 0, code: 201, message: "malformed message: \(error)", tryAgain: false, action: .protocolViolation)))
                                break
                            }
                            await hub.receive(decoded, from: outbox)
                        }
                    } catch {
                        logger.info("sync connection \(outbox.id): \(error)")
                    }
                }
                await group.next()
                await hub.closeConnection(outbox)
                group.cancelAll()
                // Let the writer flush what the hub sent last (an error) before the socket closes.
                await group.next()
            }
            logger.info("sync connection \(outbox.id) closed")
        })
    }

    private func user(_ request: Request) async throws -> User {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw APIError(status: .unauthorized, code: "MissingAuthReq", message: "the sync connection needs an Authorization: Bearer header")
        }
        do { return try await auth.authenticate(accessToken: String(header.dropFirst(7))) } catch let e as AuthError {
            throw APIError(e)
        }
    }
}
