import FerryClient
import FerryCore
import Foundation
import Testing

/// HTTPClient against a real in-process Hummingbird server.
@Suite("Net: HTTP client")
struct NetHTTPClientTests {
    @Test func getWithContentLength() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            let result = try #require(await loop.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/hello")))
            let response = try result.get()
            #expect(response.status == 200)
            #expect(response.body == Array("hello".utf8))
            #expect(response.header("CONTENT-LENGTH") == "5")
        }
    }

    @Test func postEchoesALargeBody() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            let body = pattern(3 << 20)
            let request = HTTPRequest(method: "POST", url: "http://localhost:\(port)/echo?x=1",
                                      headers: [("Content-Type", "application/octet-stream")], body: body)
            let response = try #require(await loop.send(request)).get()
            #expect(response.status == 200)
            #expect(response.body == body)
        }
    }

    @Test func chunkedResponse() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            let response = try #require(await loop.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/chunked"))).get()
            #expect(response.status == 200)
            #expect(response.header("transfer-encoding")?.lowercased() == "chunked")
            let expected = Array("part0;part1;part2;part3;part4;".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 200_000)
            #expect(response.body == expected)
        }
    }

    @Test func notFoundIsAResponseNotAnError() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            let response = try #require(await loop.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/nothing-here"))).get()
            #expect(response.status == 404)
        }
    }

    @Test func timeout() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            // /slow answers after 2 s: a timeout error (not the answer) proves the 200 ms
            // timeout fired first, without a timed assertion on a noisy machine.
            let result = try #require(await loop.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/slow"), timeoutMs: 200))
            #expect(throws: FerryError.self) { try result.get() }
            if case .failure(let error) = result {
                #expect(error.code == .io)
                #expect(error.message.contains("timed out"))
            }
        }
    }

    @Test func connectionRefused() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        let port = try closedPort()
        let result = try #require(await loop.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/")))
        guard case .failure(let error) = result else {
            Issue.record("expected an error")
            return
        }
        #expect(error.code == .io)
        #expect(error.message.contains("connect"))
    }

    @Test func unknownHost() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        let result = try #require(await loop.send(HTTPRequest(method: "GET", url: "http://no-such-host.invalid/")))
        guard case .failure(let error) = result else {
            Issue.record("expected an error")
            return
        }
        #expect(error.code == .io)
    }

    @Test func invalidRequestsFailWithInvalidArgument() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        for request in [
            HTTPRequest(method: "GET", url: "ftp://example.com/"),
            HTTPRequest(method: "GET", url: "http://example.com/", headers: [("X-Bad", "a\r\nInjected: yes")]),
            HTTPRequest(method: "GE T", url: "http://example.com/"),
            HTTPRequest(method: "GET", url: "ws://example.com/"),
        ] {
            let result = try #require(await loop.send(request))
            guard case .failure(let error) = result else {
                Issue.record("expected an error for \(request.url)")
                continue
            }
            #expect(error.code == .invalidArgument)
        }
    }
}

/// A local port nothing listens on: bound by the OS, then released.
func closedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw FerryError(.io, "socket failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw FerryError(.io, "bind failed") }
    return Int(UInt16(bigEndian: address.sin_port))
}
