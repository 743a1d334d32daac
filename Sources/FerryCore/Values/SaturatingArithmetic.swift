extension UInt64 {
    /// `self + other`, or `UInt64.max` when the sum does not fit. For counters that add
    /// numbers from the network (a server's or a client's figures): a hostile peer's 2^64-1
    /// must pin a counter, never trap the process that adds it (issue 22, point 2).
    @inlinable public func addingSaturated(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }

    /// `self - other`, or 0 when `other` is larger.
    @inlinable public func subtractingSaturated(_ other: UInt64) -> UInt64 { self > other ? self - other : 0 }
}
