#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import FerryCore
import Foundation

/// The DOWNLOAD changesets of one bootstrap, kept between the two passes of `ViewEvaluation`:
/// the first pass reads, judges and encodes the view once and spools what it encoded; the
/// second sends the spooled messages instead of reading and encoding everything again (that
/// second pass was half of a large bootstrap's cost on the server, issue 23).
///
/// Memory stays at one message: a bootstrap of one message is kept in memory; a larger one is
/// written to an unlinked file in the temporary directory (`TMPDIR`, else `/tmp`), which
/// disappears with its descriptor, even if the server is killed. The file holds what the
/// device is about to download, so its size is bounded by the view the user may read. If the
/// file cannot be made or written (a full disk), the spool says so (`isUsable`) and the
/// evaluation falls back to encoding the second pass again: slower, never lost.
final class BootstrapSpool {
    /// Bytes kept in memory before the spool moves to a file.
    static var memoryBytes: Int { SyncHub.downloadChunkBytes }

    /// The size of every spooled changeset, in order.
    private(set) var sizes: [Int] = []
    /// Why the spool stopped taking changesets, if it did.
    private(set) var failure: String?
    var isUsable: Bool { failure == nil }

    private var memory: [[UInt8]] = []
    private var memoryCount = 0
    private var fd: Int32 = -1
    private var fileBytes: Int64 = 0
    private let directory: String

    init(directory: String? = nil) {
        self.directory = directory ?? ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Adds the next changeset. After a failure, later changesets are only counted.
    func append(_ chunk: [UInt8]) {
        sizes.append(chunk.count)
        guard failure == nil else { return }
        if fd < 0 && memoryCount + chunk.count <= Self.memoryBytes {
            memory.append(chunk)
            memoryCount += chunk.count
            return
        }
        do {
            if fd < 0 {
                try openFile()
                for m in memory { try write(m) }
                memory = []
                memoryCount = 0
            }
            try write(chunk)
        } catch {
            failure = "\(error)"
            memory = []
            memoryCount = 0
            if fd >= 0 { close(fd); fd = -1 }
        }
    }

    /// Every spooled changeset, in order (only when `isUsable`).
    func forEach(_ body: ([UInt8]) async throws -> Void) async throws {
        guard failure == nil else { throw FerryError(.internal, "the bootstrap spool failed: \(failure ?? "")") }
        if fd < 0 {
            for m in memory { try await body(m) }
            return
        }
        var offset: Int64 = 0
        for size in sizes {
            let chunk = try read(size, at: offset)
            offset += Int64(size)
            try await body(chunk)
        }
    }

    private func openFile() throws {
        var template = Array((directory + "/ferry-bootstrap-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard made >= 0 else { throw SpoolError("cannot make a spool file in \(directory): \(String(cString: strerror(errno)))") }
        // Unlinked at once: nothing to clean up, whatever happens to the process.
        _ = template.withUnsafeBufferPointer { unlink($0.baseAddress!) }
        fd = made
    }

    private func write(_ chunk: [UInt8]) throws {
        try chunk.withUnsafeBytes { p in
            var done = 0
            while done < p.count {
                let n = pwrite(fd, p.baseAddress! + done, p.count - done, off_t(fileBytes) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw SpoolError("cannot write the bootstrap spool: \(String(cString: strerror(errno)))")
                }
                done += n
            }
        }
        fileBytes += Int64(chunk.count)
    }

    private func read(_ size: Int, at offset: Int64) throws -> [UInt8] {
        try [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            var done = 0
            while done < size {
                let n = pread(fd, buffer.baseAddress! + done, size - done, off_t(offset) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw SpoolError("cannot read the bootstrap spool: \(String(cString: strerror(errno)))")
                }
                if n == 0 { throw SpoolError("the bootstrap spool ended early") }
                done += n
            }
            initialized = size
        }
    }

    struct SpoolError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
