// SPDX-License-Identifier: MPL-2.0 OR LGPL-2.1-or-later
import Testing

@testable import NetActivityCore

@Suite("Continuing a stopped body with Range and If-Range")
struct RangeResumeTests {
    typealias H = HTTPCachePolicy.Headers

    @Test("a strong ETag is the validator; a weak one, a list or a non-200 is none")
    func etagValidator() {
        #expect(RangeResume.validator(status: 200, headers: H([("ETag", " \"v1\" ")])) == "\"v1\"")
        #expect(RangeResume.validator(status: 200, headers: H([("ETag", "W/\"v1\"")])) == nil)
        #expect(RangeResume.validator(status: 200, headers: H([("ETag", "\"a\""), ("etag", "\"b\"")])) == nil)
        #expect(RangeResume.validator(status: 200, headers: H([("ETag", "v1")])) == nil)
        #expect(RangeResume.validator(status: 200, headers: H([("ETag", "\"")])) == nil)
        #expect(RangeResume.validator(status: 206, headers: H([("ETag", "\"v1\"")])) == nil)
        // A weak ETag with a strong date: the ETag was given and is weak, so nothing is sent.
        #expect(
            RangeResume.validator(
                status: 200,
                headers: H([
                    ("ETag", "W/\"v1\""), ("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"),
                    ("Date", "Mon, 07 Nov 1994 08:49:37 GMT"),
                ])) == nil)
    }

    @Test("Last-Modified counts only when Date is at least a minute later")
    func dateValidator() {
        let modified = "Sun, 06 Nov 1994 08:49:37 GMT"
        #expect(
            RangeResume.validator(
                status: 200, headers: H([("Last-Modified", modified), ("Date", "Sun, 06 Nov 1994 08:50:37 GMT")]))
                == modified)
        #expect(
            RangeResume.validator(
                status: 200, headers: H([("Last-Modified", modified), ("Date", "Sun, 06 Nov 1994 08:50:36 GMT")]))
                == nil)
        #expect(RangeResume.validator(status: 200, headers: H([("Last-Modified", modified)])) == nil)
        #expect(
            RangeResume.validator(
                status: 200,
                headers: H([
                    ("Last-Modified", "Sunday, 06-Nov-94 08:49:37 GMT"), ("Date", "Mon, 07 Nov 1994 08:49:37 GMT"),
                ])) == nil)
    }

    @Test("IMF-fixdate parsing against known epoch seconds")
    func dates() {
        #expect(RangeResume.httpDate("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
        #expect(RangeResume.httpDate("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(RangeResume.httpDate("Tue, 29 Feb 2000 12:00:00 GMT") == 951_825_600)
        #expect(RangeResume.httpDate("Wed, 25 Nov 2026 10:00:00 GMT") == 1_795_600_800)
        for bad in [
            "", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:49 GMT", "Sun 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov -994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT",
        ] {
            #expect(RangeResume.httpDate(bad) == nil, "\(bad)")
        }
    }

    @Test("the request asks for the rest, if the validator holds")
    func request() {
        let headers = RangeResume.request(from: 4096, validator: "\"v1\"")
        #expect(headers.map(\.0) == ["Range", "If-Range"])
        #expect(headers.map(\.1) == ["bytes=4096-", "\"v1\""])
    }

    @Test("a 206 with exactly the rest continues; a 200 or an error starts over; any other 206 is refused")
    func answers() {
        func answer(_ status: Int, _ range: String?, offset: Int = 100, total: Int? = 1000) -> RangeResume.Answer {
            RangeResume.answer(
                status: status, headers: H(range.map { [("Content-Range", $0)] } ?? []), offset: offset,
                expectedTotal: total)
        }
        #expect(answer(206, "bytes 100-999/1000") == .continues)
        #expect(answer(206, "bytes 100-999/*") == .continues)
        #expect(answer(206, "bytes 100-999/1000", total: nil) == .continues)
        #expect(answer(206, "bytes 100-4999/5000", total: nil) == .continues)
        #expect(answer(200, nil) == .startsOver, "changed since, or ranges not served: the whole body")
        #expect(answer(200, "bytes 100-999/1000") == .startsOver)
        #expect(answer(416, nil) == .startsOver)
        #expect(answer(404, nil) == .startsOver)
        for (range, why) in [
            (nil, "no Content-Range"), ("bytes 0-999/1000", "from the start"), ("bytes 101-999/1000", "a gap"),
            ("bytes 100-499/1000", "only a part"), ("bytes 100-1999/2000", "another length"),
            ("bytes 100-99/1000", "backwards"),
            ("bytes 100-999/999", "past the end"), ("items 100-999/1000", "another unit"),
            ("bytes 100-999", "no length"),
            ("bytes 100-499/*", "a part of an unknown length"), ("bytes +100-999/1000", "a sign"),
            ("bytes 100-999/1000, bytes 0-10/1000", "two ranges"),
        ] as [(String?, String)] {
            guard case .wrongRange = answer(206, range) else {
                Issue.record("\(why): \(range ?? "none") was taken")
                continue
            }
        }
    }
}
