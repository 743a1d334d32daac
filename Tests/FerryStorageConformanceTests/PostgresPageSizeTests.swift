@testable import FerryPostgresStorage
import Testing

/// The page size of PostgreSQL's long reads (`PostgresObjectReads.PageSize`): large pages of
/// small objects (fewer queries, each of which starts an index scan), small pages of large
/// ones, so a page's bytes stay about the same.
@Suite("Storage: PostgreSQL's page size for long reads")
struct PostgresPageSizeTests {
    typealias PageSize = PostgresObjectReads.PageSize

    @Test func smallObjectsGetTheLargestPages() {
        var size = PageSize()
        #expect(size.rows == PageSize.first)
        size.read(rows: 1_000, bytes: 150_000)
        #expect(size.rows == PageSize.largest)
    }

    @Test func largeObjectsGetPagesOfAboutTheTargetBytes() {
        var size = PageSize()
        size.read(rows: 1_000, bytes: 1_000 * 16_384)
        #expect(size.rows == PageSize.targetBytes / 16_384)
        // Objects of a megabyte: the smallest page, not fewer rows.
        size.read(rows: 256, bytes: 256 << 20)
        #expect(size.rows == PageSize.smallest)
    }

    @Test func theSizeFollowsTheAverageOfEveryRowReadSoFar() {
        var size = PageSize()
        size.read(rows: 1_000, bytes: 1_000 * 8_192)
        #expect(size.rows == PageSize.targetBytes / 8_192)
        size.read(rows: 512, bytes: 512 * 100)
        #expect(size.rows == PageSize.targetBytes / ((1_000 * 8_192 + 512 * 100) / 1_512))
        // A page with no rows changes nothing (a read ends there anyway).
        let before = size.rows
        size.read(rows: 0, bytes: 0)
        #expect(size.rows == before)
    }
}
