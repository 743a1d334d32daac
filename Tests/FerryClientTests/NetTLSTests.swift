import FerryClient
import FerryCore
import Foundation
import Testing

/// https:// against `openssl s_server -www` with a self-signed certificate made at test time.
@Suite("Net: TLS", .serialized)
struct NetTLSTests {
    /// A running `openssl s_server` and the certificate it presents.
    final class TLSServer: @unchecked Sendable {
        var process = Process()
        let directory: String
        let port: Int
        var certificate: String { directory + "/cert.pem" }

        private init(directory: String, port: Int) {
            self.directory = directory
            self.port = port
        }

        /// Makes the certificate and starts the server. The blocking parts run on a Dispatch
        /// thread, never on the test's cooperative pool, and give up after 20 s.
        static func start() async throws -> TLSServer {
            let directory = NSTemporaryDirectory() + "ferry-tls-\(UInt64.random(in: 0...UInt64.max))"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let process = Process()
            let started = Arrival<Result<Int, FerryError>>()
            DispatchQueue.global().async {
                do {
                    try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                 "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem", "-days", "1",
                                 "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
                    let output = Pipe()
                    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                    process.arguments = ["openssl", "s_server", "-accept", "0.0.0.0:0", "-cert", directory + "/cert.pem",
                                         "-key", directory + "/key.pem", "-www"]
                    process.standardOutput = output
                    process.standardError = FileHandle.nullDevice
                    try process.run()
                    // s_server prints "ACCEPT 127.0.0.1:<port>" once it listens.
                    var text = ""
                    while !text.contains("ACCEPT") || !text.hasSuffix("\n") {
                        let data = output.fileHandleForReading.availableData
                        if data.isEmpty { break }
                        text += String(decoding: data, as: UTF8.self)
                    }
                    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ACCEPT") }),
                          let port = line.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) })
                    else { throw FerryError(.io, "openssl s_server did not start: \(text)") }
                    started.deliver(.success(port))
                } catch {
                    started.deliver(.failure(error as? FerryError ?? FerryError(.io, "\(error)")))
                }
            }
            guard let result = await started.wait(seconds: 20), case .success(let port) = result else {
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                throw FerryError(.io, "openssl s_server did not start")
            }
            let running = TLSServer(directory: directory, port: port)
            running.process = process
            return running
        }

        func stop() {
            // SIGKILL: the test process may block SIGTERM, and a child inherits that mask.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: directory)
        }

        static func openssl(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["openssl"] + arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw FerryError(.io, "openssl \(arguments.first ?? "") failed") }
        }
    }

    @Test func httpsWithTheCertificateAsCAFile() async throws {
        let server = try await TLSServer.start()
        defer { server.stop() }
        let loop = try TestLoop()
        defer { loop.release() }
        for host in ["localhost", "127.0.0.1"] {
            let result = try #require(await loop.send(HTTPRequest(method: "GET", url: "https://\(host):\(server.port)/"),
                                                      tls: TLSOptions(caFile: server.certificate)))
            let response = try result.get()
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self).contains("s_server"))
        }
    }

    @Test func httpsFailsVerificationWithoutTheCAFile() async throws {
        let server = try await TLSServer.start()
        defer { server.stop() }
        let loop = try TestLoop()
        defer { loop.release() }
        let result = try #require(await loop.send(HTTPRequest(method: "GET", url: "https://localhost:\(server.port)/")))
        guard case .failure(let error) = result else {
            Issue.record("a self-signed certificate was accepted")
            return
        }
        #expect(error.code == .io)
        #expect(error.message.contains("certificate"))
    }

    @Test func httpsFailsForAnotherAddress() async throws {
        let server = try await TLSServer.start()
        defer { server.stop() }
        let loop = try TestLoop()
        defer { loop.release() }
        // 127.0.0.2 reaches the server (all of 127/8 is loopback) but is not in the certificate.
        let result = try #require(await loop.send(HTTPRequest(method: "GET", url: "https://127.0.0.2:\(server.port)/"),
                                                  tls: TLSOptions(caFile: server.certificate)))
        guard case .failure(let error) = result else {
            Issue.record("a certificate for another address was accepted")
            return
        }
        #expect(error.message.contains("certificate"))
    }

    @Test func httpsWithoutVerification() async throws {
        let server = try await TLSServer.start()
        defer { server.stop() }
        let loop = try TestLoop()
        defer { loop.release() }
        let result = try #require(await loop.send(HTTPRequest(method: "GET", url: "https://127.0.0.1:\(server.port)/"),
                                                  tls: TLSOptions(insecureSkipVerify: true)))
        #expect(try result.get().status == 200)
    }
}
