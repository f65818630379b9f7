use proptest::prelude::*;

use super::*;

fn t(s: &str) -> WallTime {
    parse_rfc3339(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn zero_is_go_zero_time() {
    assert_eq!(WallTime::ZERO.to_utc(), (1, 1, 1, 0, 0, 0));
    assert!(WallTime::ZERO.is_zero());
    assert!(WallTime::default().is_zero());
    assert!(!WallTime::from_unix_seconds(0).is_zero());
    assert_eq!(WallTime::ZERO.to_rfc3339(), "0001-01-01T00:00:00Z");
}

#[test]
fn a_system_clock_reading_converts_exactly() {
    let d = Duration::new(1_795_000_000, 123_456_789);
    let w = WallTime::from_unix_duration(d);
    assert_eq!((w.unix_seconds(), w.nanos()), (1_795_000_000, 123_456_789));
    assert_eq!(w.to_rfc3339(), "2026-11-18T11:06:40Z");
    assert_eq!(
        WallTime::from_unix_duration(Duration::ZERO),
        WallTime::from_unix_seconds(0)
    );
    let far = WallTime::from_unix_duration(Duration::MAX);
    assert_eq!(far.unix_seconds(), i64::MAX);
}

#[test]
fn known_instants() {
    assert_eq!(
        WallTime::from_unix_seconds(0).to_rfc3339(),
        "1970-01-01T00:00:00Z"
    );
    assert_eq!(
        t("2026-08-22T18:31:32Z"),
        WallTime::from_unix_seconds(1_787_423_492)
    );
    assert_eq!(
        WallTime::from_unix_seconds(1_787_423_492).to_rfc3339(),
        "2026-08-22T18:31:32Z"
    );
    assert_eq!(t("2000-02-29T12:00:00Z").to_utc(), (2000, 2, 29, 12, 0, 0));
    assert_eq!(
        WallTime::EARLIEST_READABLE.to_rfc3339(),
        "0000-01-01T00:00:00Z"
    );
    assert_eq!(
        WallTime::LATEST_READABLE.to_rfc3339(),
        "9999-12-31T23:59:59Z"
    );
}

#[test]
fn formatting_drops_the_fraction() {
    let x = WallTime::new(1_787_423_492, 999_999_999).unwrap();
    assert_eq!(x.to_rfc3339(), "2026-08-22T18:31:32Z");
    assert_eq!(x.to_string(), "2026-08-22T18:31:32.999999999Z");
    assert_eq!(x.truncated(), WallTime::from_unix_seconds(1_787_423_492));
}

#[test]
fn years_outside_four_digits_are_written_as_go_writes_them() {
    // appendInt(year, 4): sign, then at least four digits.
    let before = WallTime::EARLIEST_READABLE.checked_add_seconds(-1).unwrap();
    assert_eq!(before.to_rfc3339(), "-0001-12-31T23:59:59Z");
    let after = WallTime::LATEST_READABLE
        .truncated()
        .checked_add_seconds(1)
        .unwrap();
    assert_eq!(after.to_rfc3339(), "10000-01-01T00:00:00Z");
    assert!(!before.is_readable() && !after.is_readable());
    // Never panics at the extremes.
    let _ = WallTime::from_unix_seconds(i64::MIN).to_rfc3339();
    let _ = WallTime::from_unix_seconds(i64::MAX).to_rfc3339();
}

#[test]
fn parse_accepts_what_go_accepts() {
    let base = WallTime::from_unix_seconds(1_787_423_492);
    assert_eq!(
        t("2026-08-22T18:31:32.5Z"),
        WallTime::new(1_787_423_492, 500_000_000).unwrap()
    );
    assert_eq!(
        t("2026-08-22T18:31:32,25Z"),
        WallTime::new(1_787_423_492, 250_000_000).unwrap()
    );
    // Digits after the ninth are dropped, not rounded.
    assert_eq!(
        t("2026-08-22T18:31:32.1234567899999Z"),
        WallTime::new(1_787_423_492, 123_456_789).unwrap()
    );
    assert_eq!(t("2026-08-22T20:31:32+02:00"), base);
    assert_eq!(t("2026-08-22T16:01:32-02:30"), base);
    assert_eq!(t("2026-08-22T18:31:32-00:00"), base);
    // One-digit hour (Go's layout "15").
    assert_eq!(t("2026-08-22T8:31:32Z"), t("2026-08-22T08:31:32Z"));
    // Go's offset range checks use `>`: 24 hours and 60 minutes pass.
    assert_eq!(t("2026-08-23T18:31:32+24:00"), base);
    assert_eq!(t("2026-08-22T19:32:32+01:01"), base);
    assert_eq!(t("2026-08-22T19:31:32+00:60"), base);
    // Offsets can leave the four-digit years.
    assert_eq!(t("0000-01-01T00:00:00+01:00").to_utc().0, -1);
    assert_eq!(t("9999-12-31T23:00:00-01:00").to_utc().0, 10000);
    assert!(t("0001-01-01T00:00:00Z").is_zero());
}

#[test]
fn parse_refuses_what_go_refuses() {
    for bad in [
        "",
        "2026-08-22",
        "2026-08-22 18:31:32Z",
        "2026-08-22t18:31:32Z",
        "2026-08-22T18:31:32z",
        "2026-08-22T18:31:32",
        "2026-08-22T18:31:32Z ",
        " 2026-08-22T18:31:32Z",
        "2026-8-22T18:31:32Z",
        "2026-08-2T18:31:32Z",
        "2026-08-22T18:1:32Z",
        "2026-08-22T18:31:2Z",
        "2026-08-22T18:31:32.Z",
        "2026-08-22T18:31:32+0200",
        "2026-08-22T18:31:32+2:00",
        "2026-08-22T18:31:32*02:00",
        "2026-08-22T18:31:32+02:00Z",
        "+2026-08-22T18:31:32Z",
        "20260-08-22T18:31:32Z",
        "2026-08-22T123:31:32Z",
        "2026-08-22T18:31:32.5.5Z",
    ] {
        assert!(
            matches!(parse_rfc3339(bad), Err(TimeError::Syntax(_))),
            "{bad:?} must be a syntax error, got {:?}",
            parse_rfc3339(bad)
        );
    }
    for (bad, field) in [
        ("2026-13-22T18:31:32Z", "month"),
        ("2026-00-22T18:31:32Z", "month"),
        ("2026-02-29T18:31:32Z", "day"),
        ("2026-04-31T18:31:32Z", "day"),
        ("2026-04-00T18:31:32Z", "day"),
        ("2026-08-22T24:00:00Z", "hour"),
        ("2026-08-22T18:60:00Z", "minute"),
        ("2026-08-22T18:31:60Z", "second"),
        ("2026-08-22T18:31:32+25:00", "time zone offset hour"),
        ("2026-08-22T18:31:32+00:61", "time zone offset minute"),
    ] {
        assert_eq!(
            parse_rfc3339(bad),
            Err(TimeError::Range {
                value: bad.to_owned(),
                field
            }),
            "{bad}"
        );
    }
    // 1900 is not a leap year; 2000 is.
    assert!(parse_rfc3339("1900-02-29T00:00:00Z").is_err());
    assert!(parse_rfc3339("2000-02-29T00:00:00Z").is_ok());
}

#[test]
fn arithmetic_is_checked() {
    let x = WallTime::from_unix_seconds(10);
    assert_eq!(
        x.checked_add_seconds(5),
        Some(WallTime::from_unix_seconds(15))
    );
    assert_eq!(
        WallTime::from_unix_seconds(i64::MAX).checked_add_seconds(1),
        None
    );
    assert_eq!(
        WallTime::new(10, 600_000_000)
            .unwrap()
            .saturating_add(Duration::from_millis(1_500)),
        WallTime::new(12, 100_000_000).unwrap()
    );
    assert_eq!(
        WallTime::from_unix_seconds(i64::MAX).saturating_add(Duration::from_secs(1)),
        WallTime::new(i64::MAX, 999_999_999).unwrap()
    );
    assert_eq!(WallTime::new(0, 1_000_000_000), None);
}

proptest! {
    #[test]
    fn civil_round_trip(days in -10_000_000i64..10_000_000) {
        let (y, m, d) = civil_from_days(days);
        prop_assert_eq!(days_from_civil(y, m, d), days);
        prop_assert!(d >= 1 && d <= days_in_month(y, m));
    }

    #[test]
    fn format_parse_round_trip(
        seconds in EARLIEST_READABLE_UNIX..=LATEST_READABLE_UNIX,
        nanos in 0u32..1_000_000_000,
    ) {
        let x = WallTime::new(seconds, nanos).unwrap();
        prop_assert!(x.is_readable());
        prop_assert_eq!(parse_rfc3339(&x.to_rfc3339()), Ok(x.truncated()));
        // The fraction, written as Go's RFC3339Nano would, is read back exactly.
        let with_fraction = format!("{}.{:09}Z", &x.to_rfc3339()[..19], nanos);
        prop_assert_eq!(parse_rfc3339(&with_fraction), Ok(x));
    }

    #[test]
    fn parse_never_panics(s in "\\PC{0,40}") {
        let _ = parse_rfc3339(&s);
    }

    #[test]
    fn parse_never_panics_near_the_shape(s in "[0-9]{1,5}-[0-9]{1,2}-[0-9]{1,2}[Tt ][0-9]{1,3}:[0-9]{1,2}:[0-9]{1,2}([.,][0-9]{0,12})?(Z|[+-][0-9]{1,2}:[0-9]{1,2})?") {
        if let Ok(x) = parse_rfc3339(&s) {
            // Whatever parses is within a day of the four-digit years.
            prop_assert!(x.unix_seconds() >= EARLIEST_READABLE_UNIX - SECONDS_PER_DAY);
            prop_assert!(x.unix_seconds() <= LATEST_READABLE_UNIX + SECONDS_PER_DAY);
        }
    }
}
