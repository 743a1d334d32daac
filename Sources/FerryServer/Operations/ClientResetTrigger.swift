import FerryCore

/// Why the server told a device to reset (`ferry_client_resets_total{trigger=…}`): the reasons
/// of the bind policy (`BindRules`, FerryCore).
typealias ClientResetTrigger = BindRules.ResetReason
