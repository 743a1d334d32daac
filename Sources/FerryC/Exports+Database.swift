import CFerry
import FerryClient
import FerryCore
import FerryStore

// Databases: options, open/close, schema lookups, transactions. See ferry.h.

@c @implementation
public func ferry_db_options_init(_ opts: UnsafeMutablePointer<ferry_db_options_t>!, _ version: UInt32) -> Int32 {
    ferryCall {
        let opts = try required(opts, "opts")
        try checkVersion(version, olderSizes: dbOptionSizes, what: "ferry_db_options_t")
        var d = ferry_db_options_t()
        d.version = version
        d.delivery = 0
        writeVersioned(opts, d, olderSizes: dbOptionSizes)
    }
}

/// The sizes of the database options' older versions (see `readVersioned`).
private let dbOptionSizes = [MemoryLayout<ferry_db_options_t>.offset(of: \.encryption_key)!]

@c @implementation
public func ferry_db_open(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ opts: UnsafePointer<ferry_db_options_t>!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        let o = try readVersioned(try required(opts, "opts"), ferry_db_options_t(), olderSizes: dbOptionSizes, what: "ferry_db_options_t")
        let location: DatabaseConfiguration.Location
        switch (o.path, o.in_memory_identifier) {
        case (let p?, nil): location = .file(try hostString(p, "opts->path"))
        case (nil, let m?): location = .memory(try hostString(m, "opts->in_memory_identifier"))
        case (nil, nil): throw FerryError(.invalidArgument, "opts needs a path or an in_memory_identifier")
        default: throw FerryError(.invalidArgument, "opts has both a path and an in_memory_identifier; give one")
        }
        // The synced mark makes one process a file's sync agent; an in-memory database is
        // synced only through ferry_sync_open (in_memory), which owns it.
        if o.synced, case .memory = location {
            throw FerryError(.invalidArgument, "an in-memory database cannot be marked synced here; open it with ferry_sync_open and in_memory")
        }
        if o.encryption_key != nil, case .memory = location {
            throw FerryError(.invalidArgument, "an in-memory database cannot be encrypted: give no encryption_key")
        }
        let key = try o.encryption_key.map { try EncryptionKey(copying: UnsafeRawBufferPointer(start: $0, count: EncryptionKey.size)) }
        var schema: Schema?
        if let s = o.schema { schema = try HandleTable.shared.lookup(s, .schema, as: SchemaHandle.self).schema }
        let scheduler: NotificationScheduler
        var polling: PollingScheduler?
        switch o.delivery {
        case 0: scheduler = try LoopScheduler()
        case 1:
            let p = try PollingScheduler()
            polling = p
            scheduler = p
        default: throw FerryError(.invalidArgument, "unknown delivery \(o.delivery)")
        }
        let database: Database
        do {
            database = try Database.open(DatabaseConfiguration(location: location, schema: schema, synced: o.synced, encryptionKey: key),
                                         scheduler: scheduler)
        } catch {
            scheduler.shutdown()
            throw error
        }
        out.pointee = HandleTable.shared.register(DatabaseHandle(database: database, polling: polling), kind: .database)
    }
}

@c @implementation
public func ferry_db_change_key(_ path: UnsafePointer<CChar>!, _ oldKey: UnsafePointer<UInt8>!, _ newKey: UnsafePointer<UInt8>!) -> Int32 {
    ferryCall {
        let p = try hostString(path, "path")
        let old = try oldKey.map { try EncryptionKey(copying: UnsafeRawBufferPointer(start: $0, count: EncryptionKey.size)) }
        let new = try newKey.map { try EncryptionKey(copying: UnsafeRawBufferPointer(start: $0, count: EncryptionKey.size)) }
        try Database.changeKey(path: p, oldKey: old, newKey: new)
    }
}

@c @implementation
public func ferry_db_close(_ db: OpaquePointer!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        guard !h.isLent else { throw FerryError(.invalidArgument, "this handle is lent to a callback: it closes after the call") }
        h.database.close()
    }
}

@c @implementation
public func ferry_db_free(_ db: OpaquePointer!) {
    // A handle lent to a client-reset callback belongs to Ferry: the host freeing it is a no-op.
    if let h = try? databaseHandle(db), h.isLent { return }
    HandleTable.shared.remove(db, .database, as: DatabaseHandle.self)?.release()
}

@c @implementation
public func ferry_db_write_copy(_ db: OpaquePointer!, _ path: UnsafePointer<CChar>!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        try h.checkOpen()
        try h.database.writeCopy(toPath: try hostString(path, "path"))
    }
}

@c @implementation
public func ferry_db_is_closed(_ out: UnsafeMutablePointer<Bool>!, _ db: OpaquePointer!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        try required(out, "out").pointee = h.database.isClosed
    }
}

@c @implementation
public func ferry_db_class_count(_ out: UnsafeMutablePointer<Int>!, _ db: OpaquePointer!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out, "out")
        try h.checkOpen()
        out.pointee = h.database.schema.classes.count
    }
}

@c @implementation
public func ferry_db_find_class(_ out: UnsafeMutablePointer<UInt32>!, _ db: OpaquePointer!, _ name: UnsafePointer<CChar>!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out, "out")
        let n = try hostString(name, "name")
        try h.checkOpen()
        guard let i = h.database.schema.classIndex(named: n) else { throw FerryError(.noSuchClass, "no class named '\(n)'") }
        out.pointee = UInt32(i)
    }
}

@c @implementation
public func ferry_db_get_class(_ out: UnsafeMutablePointer<ferry_class_info_t>!, _ db: OpaquePointer!, _ cls: UInt32) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out, "out")
        try h.checkOpen()
        let os = try h.objectSchema(cls)
        out.pointee = ferry_class_info_t(name: h.classNames[Int(cls)], properties: nil, property_count: os.properties.count,
                                         flags: os.isAsymmetric ? 1 : 0)
    }
}

@c @implementation
public func ferry_db_find_property(_ out: UnsafeMutablePointer<UInt32>!, _ db: OpaquePointer!, _ cls: UInt32, _ name: UnsafePointer<CChar>!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out, "out")
        let n = try hostString(name, "name")
        try h.checkOpen()
        let os = try h.objectSchema(cls)
        guard let i = os.propertyIndex(named: n) else { throw FerryError(.noSuchProperty, "class '\(os.name)' has no property '\(n)'") }
        out.pointee = UInt32(i)
    }
}

@c @implementation
public func ferry_db_get_property(_ out: UnsafeMutablePointer<ferry_property_info_t>!, _ db: OpaquePointer!, _ cls: UInt32, _ property: UInt32) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out, "out")
        try h.checkOpen()
        let os = try h.objectSchema(cls)
        guard Int(property) < os.properties.count else {
            throw FerryError(.noSuchProperty, "class '\(os.name)' has no property with key \(property)")
        }
        let p = os.properties[Int(property)]
        let flags: UInt32 = (p.isOptional ? 1 : 0) | (p.isPrimaryKey ? 2 : 0) | (p.isIndexed ? 4 : 0) | (p.isList ? 8 : 0)
        out.pointee = ferry_property_info_t(name: h.propertyNames[Int(cls)][Int(property)], type: p.type.rawValue, flags: flags,
                                            link_target: h.linkTargets[Int(cls)][Int(property)])
    }
}

@c @implementation
public func ferry_db_begin_write(_ db: OpaquePointer!) -> Int32 {
    ferryCall { try databaseHandle(db).database.beginWrite() }
}

@c @implementation
public func ferry_db_commit(_ db: OpaquePointer!) -> Int32 {
    ferryCall { _ = try databaseHandle(db).database.commit() }
}

@c @implementation
public func ferry_db_cancel(_ db: OpaquePointer!) -> Int32 {
    ferryCall { try databaseHandle(db).database.cancel() }
}

@c @implementation
public func ferry_db_is_in_transaction(_ out: UnsafeMutablePointer<Bool>!, _ db: OpaquePointer!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out, "out")
        try h.checkOpen()
        out.pointee = h.database.isInTransaction
    }
}

@c @implementation
public func ferry_db_history_count(_ out: UnsafeMutablePointer<UInt64>!, _ db: OpaquePointer!) -> Int32 {
    ferryCall {
        let h = try databaseHandle(db)
        let out = try required(out, "out")
        out.pointee = try h.database.historyCount()
    }
}

@c @implementation
public func ferry_db_verify_history(_ db: OpaquePointer!) -> Int32 {
    ferryCall { try databaseHandle(db).database.verifyHistory() }
}
