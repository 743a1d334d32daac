/// What a client reset did with the device's unsynced changes (SPEC F-NOLOSS): one entry per
/// object the unsynced changes touched, saying whether they were recovered (and will be
/// uploaded) or discarded, and why. No other sync SDK says this; a host can show it, log it,
/// or use it to redo what was discarded.
public struct ClientResetReport: Sendable, Equatable {
    public enum Outcome: String, Sendable, Equatable {
        /// The device's changes to the object were kept on top of the server's state and will
        /// be uploaded.
        case recovered
        /// The device's changes to the object were dropped; it now holds the server's state.
        case discarded
    }

    public struct Entry: Sendable, Equatable {
        public var objectType: String
        public var primaryKey: FerryValue
        public var outcome: Outcome
        /// Why, in a sentence a person can read ("created on this device and not yet synced",
        /// "deleted on the server: the device's updates to it are discarded", ...).
        public var reason: String

        public init(objectType: String, primaryKey: FerryValue, outcome: Outcome, reason: String) {
            self.objectType = objectType
            self.primaryKey = primaryKey
            self.outcome = outcome
            self.reason = reason
        }
    }

    /// Whether the unsynced changes were recovered (false: discarded, or nothing to recover).
    public var recovered: Bool
    /// The objects touched by unsynced changes, in the order the device first changed them.
    public var entries: [Entry]
    /// How many local changesets were unsynced when the reset began.
    public var unsyncedChangesets: Int

    public init(recovered: Bool, entries: [Entry], unsyncedChangesets: Int) {
        self.recovered = recovered
        self.entries = entries
        self.unsyncedChangesets = unsyncedChangesets
    }
}
