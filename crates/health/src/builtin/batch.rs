//! Job and CronJob.

use super::{Health, HealthStatus, Obj, text};

pub(super) fn job(o: &Obj<'_>) -> Result<Health, String> {
    // Only conditions whose status is True count (gitops-engine looks at the type alone;
    // a False condition is not a verdict).
    let holds = |kind: &str| -> Result<Option<String>, String> {
        Ok(o.list("status.conditions")?
            .iter()
            .find(|c| text(c, "type") == kind && text(c, "status") == "True")
            .map(|c| text(c, "message").to_owned()))
    };
    if let Some(message) = holds("Failed")? {
        return Ok(Health::new(HealthStatus::Degraded, message));
    }
    if let Some(message) = holds("Complete")? {
        return Ok(Health::new(HealthStatus::Healthy, message));
    }
    if let Some(message) = holds("Suspended")? {
        return Ok(Health::new(HealthStatus::Suspended, message));
    }
    let active = o.int("status.active")?;
    Ok(Health::new(
        HealthStatus::Progressing,
        format!("{active} active pods"),
    ))
}

pub(super) fn cronjob(o: &Obj<'_>) -> Result<Health, String> {
    if o.bool("spec.suspend")? {
        return Ok(Health::new(HealthStatus::Suspended, "CronJob is Suspended"));
    }
    if !o.has("status") {
        return Ok(Health::new(
            HealthStatus::Progressing,
            "Waiting for CronJob",
        ));
    }
    let last_schedule = o.str("status.lastScheduleTime")?;
    if last_schedule.is_empty() {
        // The status cannot tell a missed schedule from one not yet due.
        return Ok(Health::new(
            HealthStatus::Healthy,
            "CronJob has not been scheduled yet",
        ));
    }
    let last_success = o.str("status.lastSuccessfulTime")?;
    if last_success.is_empty() {
        // Never succeeded, or its first run has not finished: cannot tell which.
        return Ok(Health::new(
            HealthStatus::Healthy,
            "The CronJob never completed successfully. It may not be healthy",
        ));
    }
    if !o.list("status.active")?.is_empty() {
        return Ok(Health::new(
            HealthStatus::Healthy,
            "The job is running. Its last execution may not have been successful",
        ));
    }
    let time = |path: &str, value: &str| {
        parse_rfc3339(value).ok_or_else(|| {
            format!(
                "{} {}: field {path} is not an RFC 3339 time",
                o.kind, o.name
            )
        })
    };
    if time("status.lastSuccessfulTime", last_success)?
        < time("status.lastScheduleTime", last_schedule)?
    {
        return Ok(Health::new(
            HealthStatus::Degraded,
            "CronJob has not completed its last execution successfully",
        ));
    }
    Ok(Health::new(
        HealthStatus::Healthy,
        "CronJob has completed its last execution successfully",
    ))
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` as (seconds since 1970 UTC, nanoseconds), for
/// ordering two timestamps; `None` if malformed.
pub(crate) fn parse_rfc3339(s: &str) -> Option<(i64, u32)> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        let part = s.get(from..to)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        nanos = frac[..digits].parse::<u32>().ok()? * 10u32.pow(9 - digits as u32);
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                return None;
            }
            let hours: i64 = rest[1..3].parse().ok()?;
            let minutes: i64 = rest[4..6].parse().ok()?;
            sign * (hours * 3600 + minutes * 60)
        }
    };
    // Days from the civil date (proleptic Gregorian), Howard Hinnant's algorithm.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((
        days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        nanos,
    ))
}

#[cfg(test)]
mod tests {
    use super::parse_rfc3339;

    #[test]
    fn timestamps_order_across_formats() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some((0, 0)));
        assert_eq!(
            parse_rfc3339("2024-03-01T00:00:00Z"),
            Some((1_709_251_200, 0))
        );
        assert_eq!(
            parse_rfc3339("2024-03-01T01:00:00+01:00"),
            parse_rfc3339("2024-03-01T00:00:00Z")
        );
        assert!(parse_rfc3339("2024-03-01T00:00:00.5Z") > parse_rfc3339("2024-03-01T00:00:00Z"));
        for bad in [
            "",
            "2024-03-01",
            "2024-13-01T00:00:00Z",
            "2024-03-01T00:00:00",
            "2024-03-01T00:00:00+0100",
            "2024-03-01T00:00:00.Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
