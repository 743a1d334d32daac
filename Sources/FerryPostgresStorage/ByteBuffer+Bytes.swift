import PostgresNIO

/// `bytea` values go through `ByteBuffer`: postgres-nio encodes `[UInt8]` as an array of
/// `"char"`, not as `bytea`, so the blobs are converted at this one border.
extension ByteBuffer {
    var bytes: [UInt8] { Array(readableBytesView) }
}

extension Array where Element == UInt8 {
    var buffer: ByteBuffer { ByteBuffer(bytes: self) }
}
