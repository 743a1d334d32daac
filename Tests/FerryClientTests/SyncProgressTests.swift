import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// Progress notifiers (issue 4, point 5) on a large upload and a 100,000-object bootstrap.
@Suite("Sync progress")
struct SyncProgressTests {
    static let objects = 100_000

    /// Every unit of work in `reports` rises monotonically within [0, 1] and ends at exactly 1.0.
    static func checkUnits(_ reports: [SyncProgress], _ what: String) {
        var previous = 0.0
        for r in reports {
            #expect(r.progressEstimate >= 0 && r.progressEstimate <= 1.0, "\(what): estimate \(r.progressEstimate) out of range")
            #expect(r.transferredBytes <= r.transferableBytes || r.progressEstimate == 1.0, "\(what): \(r)")
            if previous < 1.0 { #expect(r.progressEstimate >= previous, "\(what): estimate went down from \(previous) to \(r.progressEstimate)") }
            previous = r.progressEstimate
        }
        #expect(reports.last?.progressEstimate == 1.0, "\(what): the last report is not 1.0: \(String(describing: reports.last))")
    }

    @Test func largeUploadAndBootstrapReportMonotonicProgressEndingAtOne() async throws {
        try await SyncTestServer.withServer { url in
            let writer = try await SessionTestApp(url: url, subject: "progress")
            let source = try writer.open("source.ferry")
            try await source.subscribe("ownerId == '\(writer.user.id)'")
            // Everything committed while paused is the outstanding upload work once resumed.
            source.suspend()
            let db = source.database
            for batch in 0..<10 {
                try db.beginWrite()
                for n in 0..<(Self.objects / 10) {
                    try db.create(classIndex: 0, values: [(0, .objectId(.generate())), (1, .string(writer.user.id)),
                                                          (2, .string("item \(batch)-\(n)")), (3, .int(Int64(n % 10)))])
                }
                try db.commit()
            }
            let uploads = EventLog<SyncProgress>()
            let uploadToken = source.addProgressNotifier(direction: .upload, mode: .forCurrentlyOutstandingWork) { uploads.add($0) }
            let forever = EventLog<SyncProgress>()
            let foreverToken = source.addProgressNotifier(direction: .upload, mode: .reportIndefinitely) { forever.add($0) }
            #expect(await uploads.wait { !$0.isEmpty })
            #expect(uploads.all.first.map { $0.progressEstimate < 1.0 && $0.transferableBytes > 1_000_000 } == true,
                    "\(String(describing: uploads.all.first))")
            source.resume()
            #expect(await uploads.wait(seconds: 300) { $0.last?.progressEstimate == 1.0 })
            try await source.waitUpload()
            Self.checkUnits(uploads.all, "upload (current work)")
            #expect(uploads.all.count >= 3, "only \(uploads.all.count) upload reports: \(uploads.all)")
            let total = uploads.all.last!.transferableBytes
            #expect(uploads.all.last!.transferredBytes == total)

            // The indefinite notifier saw the same unit, and reports the next one too.
            #expect(await forever.wait { $0.last?.progressEstimate == 1.0 })
            let firstUnit = forever.all.count
            try source.createItem(owner: writer.user.id, name: "one more")
            #expect(await forever.wait { $0.count > firstUnit && $0.last?.progressEstimate == 1.0 })
            Self.checkUnits(Array(forever.all.prefix(firstUnit)), "upload (indefinite, first unit)")
            Self.checkUnits(Array(forever.all.dropFirst(firstUnit)), "upload (indefinite, second unit)")
            #expect(forever.all.last!.transferableBytes > total)
            // A completed current-work notifier is done: the second unit did not reach it.
            #expect(uploads.all.last!.transferableBytes == total)
            foreverToken.cancel()
            uploadToken.cancel()

            // A new device bootstraps the 100,000 objects.
            let reader = try await SessionTestApp(url: url, subject: "progress")
            let target = try reader.open("target.ferry")
            let downloads = EventLog<SyncProgress>()
            _ = try target.updateSubscriptions { $0.add(name: "mine", objectType: "Item", query: "ownerId == '\(writer.user.id)'") }
            let downloadToken = target.addProgressNotifier(direction: .download, mode: .forCurrentlyOutstandingWork) { downloads.add($0) }
            #expect(await downloads.wait(seconds: 300) { $0.last?.progressEstimate == 1.0 })
            try await target.waitDownload()
            #expect(try target.database.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).count == Self.objects + 1)
            Self.checkUnits(downloads.all, "bootstrap")
            #expect(downloads.all.count >= 3, "only \(downloads.all.count) download reports: \(downloads.all)")
            #expect(downloads.all.dropLast().allSatisfy { $0.transferableBytes == downloads.all.last!.transferableBytes })
            downloadToken.cancel()
            // What the estimates did, for the record (issue 4's closing note quotes it).
            func summary(_ r: [SyncProgress]) -> String {
                guard let first = r.first, let last = r.last else { return "no reports" }
                return "\(r.count) reports, first \(first.progressEstimate) (\(first.transferredBytes)/\(first.transferableBytes) bytes), "
                    + "last \(last.progressEstimate) (\(last.transferredBytes)/\(last.transferableBytes) bytes)"
            }
            print("progress: upload of \(Self.objects): \(summary(uploads.all)); bootstrap of \(Self.objects + 1): \(summary(downloads.all))")

            // Released tokens deliver nothing more.
            let countBefore = forever.all.count
            try source.createItem(owner: writer.user.id, name: "after cancel")
            try await source.waitUpload()
            #expect(forever.all.count == countBefore)
            source.close(); target.close()
            writer.app.close(); reader.app.close()
        }
    }
}
