import Testing
@testable import Symbolication

/// The uploader's decisions on a server's answer, without a server: the state each answer leaves a
/// report in, the crash id read from each server's answer, the URL's query.
@Suite struct CrashUploaderTests {
  static func answer(_ status: Int, _ body: String, headers: [(String, String)] = []) -> Result<HTTPClient.Response, HTTPClient.Failure> {
    .success(HTTPClient.Response(status: status, headers: headers.map { (name: $0.0, value: $0.1) }, body: Array(body.utf8)))
  }

  @Test func outcomes() {
    let now: Int64 = 1_000_000
    // 2xx: sent.
    #expect(CrashUploader.classify(Self.answer(200, "CrashID=bp-1"), attempts: 1, rateLimit: 3600, now: now).state == .sent)
    // 5xx, 408, redirects and the network: waiting after the rate limit, doubling per attempt, at most a day.
    let failed = CrashUploader.classify(Self.answer(503, "busy\nmore"), attempts: 3, rateLimit: 3600, now: now)
    #expect(failed.state == .waiting && failed.reason == "HTTP 503: busy" && failed.nextAttempt == now + 4 * 3600)
    #expect(CrashUploader.classify(Self.answer(500, ""), attempts: 20, rateLimit: 3600, now: now).nextAttempt == now + 86_400)
    #expect(CrashUploader.classify(Self.answer(408, ""), attempts: 1, rateLimit: 60, now: now).state == .waiting)
    #expect(CrashUploader.classify(Self.answer(302, ""), attempts: 1, rateLimit: 60, now: now).state == .waiting)
    let network = CrashUploader.classify(.failure(.network("Couldn't connect to server")), attempts: 1, rateLimit: 60, now: now)
    #expect(network.state == .waiting && network.reason == "Couldn't connect to server" && network.nextAttempt == now + 60)
    let missing = CrashUploader.classify(.failure(.noLibrary("cannot load libcurl.so.4: not found")), attempts: 1, rateLimit: 60, now: now)
    #expect(missing.state == .waiting && missing.reason?.hasSuffix("(to upload, install libcurl: apt install libcurl4)") == true)
    // 429: not before its Retry-After (nor the rate limit); without one, the backoff.
    let limited = CrashUploader.classify(Self.answer(429, "", headers: [("retry-after", " 7200")]), attempts: 1, rateLimit: 60, now: now)
    #expect(limited.state == .waiting && limited.nextAttempt == now + 7200)
    #expect(CrashUploader.classify(Self.answer(429, "", headers: [("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")]),
                                   attempts: 1, rateLimit: 60, now: now).nextAttempt == now + 60)
    // Other 4xx: refused for good, the reason kept.
    let refused = CrashUploader.classify(Self.answer(413, "too large"), attempts: 1, rateLimit: 60, now: now)
    #expect(refused.state == .rejected && refused.reason == "HTTP 413: too large" && refused.nextAttempt == nil)
  }

  @Test func crashIDs() {
    // Socorro's collector, Sentry's minidump endpoint, a Breakpad server's bare id; an HTML page is none.
    #expect(CrashUploader.crashID(Array("CrashID=bp-6fa0ca01-2a4d-4c9f-b07e-c15d62231207\n".utf8))
            == "bp-6fa0ca01-2a4d-4c9f-b07e-c15d62231207")
    #expect(CrashUploader.crashID(Array(#"{"id":"fc6d8c0c43fc4630ad850ee518f1b9d0"}"#.utf8)) == "fc6d8c0c43fc4630ad850ee518f1b9d0")
    #expect(CrashUploader.crashID(Array(" 3e4fa0b2c1 \n".utf8)) == "3e4fa0b2c1")
    #expect(CrashUploader.crashID(Array("<html><body>ok</body></html>".utf8)) == nil)
    #expect(CrashUploader.crashID([]) == nil)
  }

  @Test func urlQuery() {
    let fields: [(name: String, value: String)] = [("prod", "my app"), ("ver", "1.0"), ("guid", "a-b")]
    #expect(CrashUploader.url("https://h/submit", fields: fields) == "https://h/submit?product=my%20app&version=1.0&guid=a-b")
    #expect(CrashUploader.url("https://h/api/1/minidump/?sentry_key=k#x", fields: [("guid", "g")])
            == "https://h/api/1/minidump/?sentry_key=k&guid=g#x")
    #expect(CrashUploader.url("https://h/", fields: []) == "https://h/")
    #expect(CrashUploader.quotedName("a\"b\r\nc") == "a%22b%0D%0Ac")
  }
}
