import Glibc

/// "YYYY-MM-DD HH:MM:SS" (a "+0000" after it ignored) as seconds since the epoch (glibc's timegm); 0 when
/// the text has fewer than six numbers. The oracle for the times reports state (`Date/Time:`).
public func epochSeconds(_ text: String) -> Int64 {
  let fields = text.split(whereSeparator: { $0 == "-" || $0 == " " || $0 == ":" }).compactMap { Int32($0) }
  guard fields.count >= 6 else { return 0 }
  var parts = tm()
  parts.tm_year = fields[0] - 1900
  parts.tm_mon = fields[1] - 1
  parts.tm_mday = fields[2]
  parts.tm_hour = fields[3]
  parts.tm_min = fields[4]
  parts.tm_sec = fields[5]
  return Int64(timegm(&parts))
}
