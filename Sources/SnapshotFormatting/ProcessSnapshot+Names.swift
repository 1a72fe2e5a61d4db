import Snapshot

extension ProcessSnapshot {
  /// `YYYY-MM-DD HH:MM:SS +0000` for `seconds` since the epoch (UTC), as the crash handler's `w_date`.
  static func dateText(_ seconds: Int64) -> String {
    // Howard Hinnant's civil_from_days, as crash.c uses it.
    let days = seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400)
    let rest = seconds - days * 86400
    let z = days + 719468
    let era = (z >= 0 ? z : z - 146096) / 146097
    let dayOfEra = z - era * 146097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146096) / 365
    var year = yearOfEra + era * 400
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    if month <= 2 { year += 1 }
    func digits(_ value: Int64, _ width: Int) -> String {
      let text = String(value)
      return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    return "\(digits(year, 4))-\(digits(month, 2))-\(digits(day, 2)) "
      + "\(digits(rest / 3600, 2)):\(digits(rest / 60 % 60, 2)):\(digits(rest % 60, 2)) +0000"
  }

  /// The crash handler's `signal_name`: the signals it handles by name, `nil` for others.
  package static func signalName(_ signal: Int32) -> String? {
    switch signal {
    case 11: "SIGSEGV"
    case 7: "SIGBUS"
    case 4: "SIGILL"
    case 8: "SIGFPE"
    case 6: "SIGABRT"
    case 5: "SIGTRAP"
    default: nil
    }
  }

  /// The crash handler's `code_name`: `si_code`'s `<signal.h>` name for `signal`, `nil` when unknown.
  static func codeName(signal: Int32, code: Int32) -> String? {
    switch code {
    case 0: return "SI_USER"
    case 0x80: return "SI_KERNEL"
    case -1: return "SI_QUEUE"
    case -2: return "SI_TIMER"
    case -3: return "SI_MESGQ"
    case -4: return "SI_ASYNCIO"
    case -5: return "SI_SIGIO"
    case -6: return "SI_TKILL"
    default: break
    }
    let names: [String]
    switch signal {
    case 11: names = ["SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR", "SEGV_ACCADI", "SEGV_ADIDERR",
                      "SEGV_ADIPERR", "SEGV_MTEAERR", "SEGV_MTESERR", "SEGV_CPERR"]
    case 7: names = ["BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"]
    case 4: names = ["ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC",
                     "ILL_BADSTK", "ILL_BADIADDR"]
    case 8: names = ["FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV",
                     "FPE_FLTSUB", "FPE_FLTUNK", "FPE_CONDTRAP"]
    case 5: names = ["TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT", "TRAP_UNK", "TRAP_PERF"]
    default: return nil
    }
    return code >= 1 && Int(code) <= names.count ? names[Int(code) - 1] : nil
  }
}
