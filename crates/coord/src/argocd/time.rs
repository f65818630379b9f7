//! Wall-clock instants as Argo CD writes them in the shard mapping (`metav1.Time`), with Go's
//! RFC 3339 formatting and parsing re-implemented by hand.
//!
//! Nothing here reads a clock: an instant is a plain value the caller supplies. The calendar
//! arithmetic is the proleptic Gregorian "days from civil" algorithm (H. Hinnant), which is
//! exact for every `i64` day count we can reach, so no date crate is needed for the dozen
//! lines it takes.

use std::fmt;
use std::time::Duration;

const NANOS_PER_SECOND: u32 = 1_000_000_000;
const SECONDS_PER_DAY: i64 = 86_400;

/// Unix seconds of Go's zero `time.Time`, 0001-01-01T00:00:00Z.
const GO_ZERO_UNIX: i64 = -62_135_596_800;
/// Unix seconds of 0000-01-01T00:00:00Z, the earliest instant Go's RFC 3339 parser reads back.
const EARLIEST_READABLE_UNIX: i64 = -62_167_219_200;
/// Unix seconds of 9999-12-31T23:59:59Z, the latest instant Go's RFC 3339 parser reads back.
const LATEST_READABLE_UNIX: i64 = 253_402_300_799;

/// An instant on the wall clock, in UTC, with nanosecond precision.
///
/// It mirrors Go's `time.Time` as `metav1.Time` uses it: [`WallTime::ZERO`] is Go's zero time
/// (0001-01-01T00:00:00Z), which the mapping writes as `null`. The order is chronological.
/// Only the wire format is wall-clock based; fleetshard never decides anything by comparing
/// such an instant with its own clock (product guarantee G6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WallTime {
    // Field order matters: the derived `Ord` is chronological.
    unix_seconds: i64,
    nanos: u32,
}

impl Default for WallTime {
    /// Go's zero time, like a fresh `metav1.Time{}`.
    fn default() -> Self {
        WallTime::ZERO
    }
}

impl WallTime {
    /// The instant `since_epoch` after 1970-01-01T00:00:00Z: what a system clock reports as
    /// `SystemTime::now().duration_since(UNIX_EPOCH)`. Nothing here reads that clock: the
    /// binary does, and passes the reading in (as a heartbeat's time to write, or a
    /// status's timestamp; no fleetshard decision compares it, G6). Saturates at the end of
    /// the representable range (about 292 billion years away).
    pub const fn from_unix_duration(since_epoch: Duration) -> WallTime {
        let secs = since_epoch.as_secs();
        if secs > i64::MAX as u64 {
            return WallTime {
                unix_seconds: i64::MAX,
                nanos: NANOS_PER_SECOND - 1,
            };
        }
        WallTime {
            unix_seconds: secs as i64,
            nanos: since_epoch.subsec_nanos(),
        }
    }

    /// Go's zero time, 0001-01-01T00:00:00Z: an unset heartbeat, encoded as `null`.
    pub const ZERO: WallTime = WallTime {
        unix_seconds: GO_ZERO_UNIX,
        nanos: 0,
    };

    /// The earliest instant that survives an encode/decode round trip: 0000-01-01T00:00:00Z.
    /// Go writes earlier years (`-0001-…`) but cannot parse them back.
    pub const EARLIEST_READABLE: WallTime = WallTime {
        unix_seconds: EARLIEST_READABLE_UNIX,
        nanos: 0,
    };

    /// The latest instant that survives an encode/decode round trip (once the fraction is
    /// dropped): 9999-12-31T23:59:59.999999999Z. Go writes `10000-…` but cannot parse it back.
    pub const LATEST_READABLE: WallTime = WallTime {
        unix_seconds: LATEST_READABLE_UNIX,
        nanos: NANOS_PER_SECOND - 1,
    };

    /// The instant `unix_seconds` seconds plus `nanos` nanoseconds after 1970-01-01T00:00:00Z;
    /// `None` when `nanos` is not below one second.
    pub const fn new(unix_seconds: i64, nanos: u32) -> Option<WallTime> {
        if nanos < NANOS_PER_SECOND {
            Some(WallTime {
                unix_seconds,
                nanos,
            })
        } else {
            None
        }
    }

    /// The whole second `unix_seconds` after the Unix epoch.
    pub const fn from_unix_seconds(unix_seconds: i64) -> WallTime {
        WallTime {
            unix_seconds,
            nanos: 0,
        }
    }

    /// Seconds since the Unix epoch (floor: the fraction is in [`WallTime::nanos`]).
    pub const fn unix_seconds(self) -> i64 {
        self.unix_seconds
    }

    /// The fraction of the second, in nanoseconds (`0..1_000_000_000`).
    pub const fn nanos(self) -> u32 {
        self.nanos
    }

    /// Whether this is Go's zero time (`time.Time.IsZero`), written as `null`.
    pub const fn is_zero(self) -> bool {
        self.unix_seconds == GO_ZERO_UNIX && self.nanos == 0
    }

    /// The same instant with the fraction dropped, as the mapping stores it.
    pub const fn truncated(self) -> WallTime {
        WallTime::from_unix_seconds(self.unix_seconds)
    }

    /// Whether the encoded form of this instant can be decoded again (by Go or by us): zero,
    /// or within [`WallTime::EARLIEST_READABLE`]..=[`WallTime::LATEST_READABLE`].
    pub fn is_readable(self) -> bool {
        self.is_zero() || (WallTime::EARLIEST_READABLE..=WallTime::LATEST_READABLE).contains(&self)
    }

    /// This instant moved by `seconds`; `None` on `i64` overflow.
    pub const fn checked_add_seconds(self, seconds: i64) -> Option<WallTime> {
        match self.unix_seconds.checked_add(seconds) {
            Some(unix_seconds) => Some(WallTime {
                unix_seconds,
                nanos: self.nanos,
            }),
            None => None,
        }
    }

    /// This instant plus `duration`, saturating at the end of the representable range (used
    /// for Go's `t.Add(d)`, whose operands here are far from any limit).
    pub fn saturating_add(self, duration: Duration) -> WallTime {
        let seconds = i64::try_from(duration.as_secs()).unwrap_or(i64::MAX);
        let mut nanos = self.nanos + duration.subsec_nanos();
        let mut carry = 0;
        if nanos >= NANOS_PER_SECOND {
            nanos -= NANOS_PER_SECOND;
            carry = 1;
        }
        match self
            .unix_seconds
            .checked_add(seconds)
            .and_then(|s| s.checked_add(carry))
        {
            Some(unix_seconds) => WallTime {
                unix_seconds,
                nanos,
            },
            None => WallTime {
                unix_seconds: i64::MAX,
                nanos: NANOS_PER_SECOND - 1,
            },
        }
    }

    /// The instant at `year-month-day hour:minute:second` UTC; `None` for an impossible date
    /// or time of day. Years before 1 and after 9999 are allowed (proleptic Gregorian).
    pub fn from_utc(
        year: i64,
        month: u32,
        day: u32,
        hour: u32,
        minute: u32,
        second: u32,
    ) -> Option<WallTime> {
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        // |year| is bounded so that the day count cannot overflow the seconds.
        if year.unsigned_abs() > 100_000_000_000 {
            return None;
        }
        let days = days_from_civil(year, month, day);
        let seconds = i64::from(hour) * 3600 + i64::from(minute) * 60 + i64::from(second);
        Some(WallTime::from_unix_seconds(
            days * SECONDS_PER_DAY + seconds,
        ))
    }

    /// The UTC calendar fields `(year, month, day, hour, minute, second)`.
    pub fn to_utc(self) -> (i64, u32, u32, u32, u32, u32) {
        let days = self.unix_seconds.div_euclid(SECONDS_PER_DAY);
        // `rem_euclid` is in 0..86_400, so the narrowing casts below cannot truncate.
        let secs = self.unix_seconds.rem_euclid(SECONDS_PER_DAY) as u32;
        let (year, month, day) = civil_from_days(days);
        (year, month, day, secs / 3600, secs / 60 % 60, secs % 60)
    }

    /// Go's `t.UTC().Format(time.RFC3339)`: `YYYY-MM-DDTHH:MM:SSZ`, whole seconds, the
    /// fraction dropped. A year outside 0..=9999 is written as Go does (`-0001`, `10000`),
    /// which Go itself cannot parse back; see [`WallTime::is_readable`].
    pub fn to_rfc3339(self) -> String {
        let mut out = String::with_capacity(20);
        self.write_rfc3339(&mut out);
        out
    }

    /// Appends [`WallTime::to_rfc3339`] to `out`.
    pub fn write_rfc3339(self, out: &mut String) {
        let (year, month, day, hour, minute, second) = self.to_utc();
        // Go's appendInt(year, 4): the sign, then the magnitude padded to four digits.
        if year < 0 {
            out.push('-');
        }
        push_padded(out, year.unsigned_abs(), 4);
        out.push('-');
        push_padded(out, u64::from(month), 2);
        out.push('-');
        push_padded(out, u64::from(day), 2);
        out.push('T');
        push_padded(out, u64::from(hour), 2);
        out.push(':');
        push_padded(out, u64::from(minute), 2);
        out.push(':');
        push_padded(out, u64::from(second), 2);
        out.push('Z');
    }

    /// Go's `time.Parse(time.RFC3339, s)`, converted to UTC: see [`parse_rfc3339`].
    pub fn parse_rfc3339(s: &str) -> Result<WallTime, TimeError> {
        parse_rfc3339(s)
    }
}

impl fmt::Display for WallTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_zero() {
            return f.write_str("zero time");
        }
        let mut s = self.to_rfc3339();
        if self.nanos != 0 {
            // Keep the fraction in human-readable output; only the wire format drops it.
            s.pop();
            s.push_str(&format!(".{:09}Z", self.nanos));
        }
        f.write_str(&s)
    }
}

/// Why a string is not an RFC 3339 time for Go's `time.Parse(time.RFC3339, …)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// The text does not have the shape `YYYY-MM-DDTHH:MM:SS[.frac](Z|±hh:mm)`.
    #[error("{0:?} is not an RFC 3339 time (YYYY-MM-DDTHH:MM:SS[.fraction] then Z or ±hh:mm)")]
    Syntax(String),
    /// The shape is right but a field is out of range (month 13, day 31 in April, …).
    #[error("{value:?} is not an RFC 3339 time: {field} out of range")]
    Range {
        /// The text.
        value: String,
        /// The field that is out of range.
        field: &'static str,
    },
}

/// Go's `time.Parse(time.RFC3339, s)`, the instant converted to UTC.
///
/// Go's general layout parser is more lenient than RFC 3339 and this reproduces it, because
/// whatever Argo CD reads we must read too: the hour may have one digit, the fraction may
/// follow `.` or `,` and have any number of digits (only the first nine count, truncated),
/// the offset hour may be 24 and its minutes 60. Everything else is strict: four-digit year
/// 0000–9999, two-digit month, day, minute and second, an uppercase `T` and `Z`, second 60
/// refused, and nothing after the zone.
pub fn parse_rfc3339(s: &str) -> Result<WallTime, TimeError> {
    let syntax = || TimeError::Syntax(s.to_owned());
    let range = |field| TimeError::Range {
        value: s.to_owned(),
        field,
    };
    let b = s.as_bytes();
    let mut p = Cursor { b, i: 0 };

    let year = p.digits(4).ok_or_else(syntax)?;
    p.literal(b'-').ok_or_else(syntax)?;
    let month = p.digits(2).ok_or_else(syntax)?;
    if !(1..=12).contains(&month) {
        return Err(range("month"));
    }
    p.literal(b'-').ok_or_else(syntax)?;
    let day = p.digits(2).ok_or_else(syntax)?;
    p.literal(b'T').ok_or_else(syntax)?;
    // Go's layout "15" takes one or two digits.
    let hour = p.digits(2).or_else(|| p.digits(1)).ok_or_else(syntax)?;
    if hour > 23 {
        return Err(range("hour"));
    }
    p.literal(b':').ok_or_else(syntax)?;
    let minute = p.digits(2).ok_or_else(syntax)?;
    if minute > 59 {
        return Err(range("minute"));
    }
    p.literal(b':').ok_or_else(syntax)?;
    let second = p.digits(2).ok_or_else(syntax)?;
    if second > 59 {
        return Err(range("second"));
    }

    let mut nanos = 0u32;
    if matches!(p.peek(), Some(b'.' | b',')) && p.peek_at(1).is_some_and(|c| c.is_ascii_digit()) {
        p.i += 1;
        let mut count = 0;
        while let Some(c) = p.peek().filter(u8::is_ascii_digit) {
            if count < 9 {
                nanos = nanos * 10 + u32::from(c - b'0');
            }
            count += 1;
            p.i += 1;
        }
        for _ in count..9 {
            nanos *= 10;
        }
    }

    let offset_seconds: i64 = if p.peek() == Some(b'Z') {
        p.i += 1;
        0
    } else {
        let rest = &b[p.i..];
        if rest.len() < 6 || rest[3] != b':' {
            return Err(syntax());
        }
        let sign = rest[0];
        p.i += 1;
        let hours = p.digits(2).ok_or_else(syntax)?;
        p.i += 1;
        let minutes = p.digits(2).ok_or_else(syntax)?;
        // Go checks with `>`, accepting 24 hours and 60 minutes.
        if hours > 24 {
            return Err(range("time zone offset hour"));
        }
        if minutes > 60 {
            return Err(range("time zone offset minute"));
        }
        let offset = i64::from(hours * 3600 + minutes * 60);
        match sign {
            b'+' => offset,
            b'-' => -offset,
            _ => return Err(syntax()),
        }
    };
    if p.i != b.len() {
        return Err(syntax());
    }
    if day < 1 || day > days_in_month(i64::from(year), month) {
        return Err(range("day"));
    }
    let local = WallTime::from_utc(i64::from(year), month, day, hour, minute, second)
        .ok_or_else(|| range("date"))?;
    // Local time minus its offset is UTC.
    Ok(WallTime {
        unix_seconds: local.unix_seconds - offset_seconds,
        nanos,
    })
}

/// A byte cursor for [`parse_rfc3339`].
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.b.get(self.i + ahead).copied()
    }

    /// Exactly `n` ASCII digits as a number, consumed; `None` (nothing consumed) otherwise.
    fn digits(&mut self, n: usize) -> Option<u32> {
        let run = self.b.get(self.i..self.i + n)?;
        if !run.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.i += n;
        Some(run.iter().fold(0, |acc, &c| acc * 10 + u32::from(c - b'0')))
    }

    fn literal(&mut self, c: u8) -> Option<()> {
        (self.peek() == Some(c)).then(|| self.i += 1)
    }
}

/// Appends `value` in decimal, left-padded with zeros to `width` digits.
fn push_padded(out: &mut String, value: u64, width: usize) {
    let digits = value.to_string();
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(&digits);
}

fn is_leap_year(year: i64) -> bool {
    year.rem_euclid(4) == 0 && (year.rem_euclid(100) != 0 || year.rem_euclid(400) == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap_year(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let (m, d) = (i64::from(month), i64::from(day));
    // Years start in March so that the leap day is the last day of the year.
    let y = if m <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Hinnant's
/// `civil_from_days`). Exact for every day an `i64` of seconds can reach.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both are small and positive by construction (1..=31 and 1..=12).
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests;
