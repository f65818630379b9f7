//! Durations as Argo CD's settings write them.

use std::time::Duration;

/// A Go duration (`time.ParseDuration`, as Argo CD reads its settings): `180s`, `3m`,
/// `1m30s`, `1h0m0s`, `500ms`; or a bare number of seconds.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    if s.is_empty() {
        return Err("empty duration: give e.g. 180s, 3m or 1m30s".to_owned());
    }
    let too_long = || format!("{s:?}: too long");
    let mut rest = s;
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let n: u64 = rest[..digits].parse().map_err(|_| {
            format!("{s:?}: expected whole numbers with units, e.g. 180s, 3m or 1m30s")
        })?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let per = match &rest[..unit] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            other => return Err(format!("{s:?}: unknown unit {other:?} (ms, s, m, h)")),
        };
        rest = &rest[unit..];
        let part = u32::try_from(n)
            .ok()
            .and_then(|n| per.checked_mul(n))
            .ok_or_else(too_long)?;
        total = total.checked_add(part).ok_or_else(too_long)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_argo_cds() {
        let p = parse_go_duration;
        assert_eq!(p("180s"), Ok(Duration::from_secs(180)));
        assert_eq!(p("3m"), Ok(Duration::from_secs(180)));
        assert_eq!(p("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(p("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(p("90"), Ok(Duration::from_secs(90)));
        assert_eq!(p("0"), Ok(Duration::ZERO));
        assert_eq!(p("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(p("1h0m0s"), Ok(Duration::from_secs(3600)));
        assert!(p("").is_err());
        assert!(p("1m30").unwrap_err().contains("unknown unit"));
        assert!(p("3 days").unwrap_err().contains("unknown unit"));
        assert!(p("s").is_err());
        assert!(p("99999999999999999999h").is_err());
    }
}
