//! Kubernetes resource quantities (`resource.Quantity`), parsed exactly so that equal
//! amounts written differently compare equal: `"1"`, `1`, `"1000m"` and `"1e3m"` are one
//! CPU; `"1Gi"` and `"1024Mi"` are one gibibyte.
//!
//! A quantity is `<sign><digits>[.<digits>]<suffix>` where the suffix is binary (`Ki` … `Ei`,
//! powers of 1024), decimal (`n u m "" k M G T P E`) or a decimal exponent (`e3`, `E-2`).
//! The value is kept as an exact decimal `mantissa × 10^exponent` (powers of two are folded
//! into the mantissa), so no float rounding can make two different amounts equal.

use serde_json::Value;

/// An exact decimal amount: `(-1)^negative × mantissa × 10^exponent`, normalised so that
/// the mantissa has no trailing zero digit (zero is `0 × 10^0`, never negative). Two
/// quantities are equal amounts iff their normal forms are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quantity {
    negative: bool,
    mantissa: u128,
    exponent: i32,
}

impl Quantity {
    /// Parses a quantity string; `None` when it is not one (or does not fit in 128 bits).
    pub(crate) fn parse(text: &str) -> Option<Quantity> {
        let text = text.trim();
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let mut mantissa: u128 = 0;
        let mut exponent: i32 = 0;
        let mut after_point = false;
        for c in number.chars() {
            if c == '.' {
                after_point = true;
                continue;
            }
            let digit = u128::from(c.to_digit(10)?);
            mantissa = mantissa.checked_mul(10)?.checked_add(digit)?;
            if after_point {
                exponent = exponent.checked_sub(1)?;
            }
        }
        let (pow2, pow10) = suffix_powers(suffix)?;
        mantissa = mantissa.checked_mul(1u128.checked_shl(pow2)?)?;
        exponent = exponent.checked_add(pow10)?;
        Some(Quantity::normal(negative, mantissa, exponent))
    }

    /// Reads a JSON value as a quantity: a string in quantity syntax, or a number (YAML
    /// `cpu: 1` arrives as a number).
    pub(crate) fn from_json(value: &Value) -> Option<Quantity> {
        match value {
            Value::String(s) => Quantity::parse(s),
            Value::Number(n) => Quantity::parse(&n.to_string()).or_else(|| {
                // serde_json writes large floats with an exponent ("1e21"); split it off.
                let text = n.to_string();
                let (base, exp) = text.split_once(['e', 'E'])?;
                let q = Quantity::parse(base)?;
                let exp: i32 = exp.trim_start_matches('+').parse().ok()?;
                Some(Quantity::normal(
                    q.negative,
                    q.mantissa,
                    q.exponent.checked_add(exp)?,
                ))
            }),
            _ => None,
        }
    }

    fn normal(negative: bool, mut mantissa: u128, mut exponent: i32) -> Quantity {
        if mantissa == 0 {
            return Quantity {
                negative: false,
                mantissa: 0,
                exponent: 0,
            };
        }
        while mantissa.is_multiple_of(10) {
            mantissa /= 10;
            exponent += 1;
        }
        Quantity {
            negative,
            mantissa,
            exponent,
        }
    }
}

/// The binary and decimal powers a suffix multiplies by; `None` for an unknown suffix.
fn suffix_powers(suffix: &str) -> Option<(u32, i32)> {
    let powers = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        _ => {
            let exp = suffix.strip_prefix(['e', 'E'])?;
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (0, exp.trim_start_matches('+').parse().ok()?)
        }
    };
    Some(powers)
}

/// Whether two JSON values are the same quantity. Values that are not quantities are never
/// equal here (the caller falls back to plain equality).
pub(crate) fn quantities_equal(a: &Value, b: &Value) -> bool {
    match (Quantity::from_json(a), Quantity::from_json(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_amounts_written_differently() {
        let same = [
            (json!("1"), json!("1000m")),
            (json!(1), json!("1")),
            (json!(0.5), json!("500m")),
            (json!("1Gi"), json!("1024Mi")),
            (json!("1Mi"), json!("1048576")),
            (json!("1k"), json!("1e3")),
            (json!("1.5Gi"), json!("1536Mi")),
            (json!("0"), json!("0m")),
            (json!("-0"), json!("0")),
            (json!("100M"), json!("0.1G")),
        ];
        for (a, b) in same {
            assert!(quantities_equal(&a, &b), "{a} should equal {b}");
        }
    }

    #[test]
    fn different_amounts() {
        let different = [
            (json!("1"), json!("999m")),
            (json!("1Gi"), json!("1G")),
            (json!("1Ki"), json!("1k")),
            (json!("-1"), json!("1")),
            (json!("1"), json!("one")),
        ];
        for (a, b) in different {
            assert!(!quantities_equal(&a, &b), "{a} should differ from {b}");
        }
    }

    #[test]
    fn rejects_malformed() {
        for bad in ["", "m", "1..2", "1Xi", "1e", "1e+", ".", "--1", "1 Gi"] {
            assert_eq!(Quantity::parse(bad), None, "{bad:?}");
        }
        // 2^60 × a 37-digit mantissa overflows 128 bits: refused, not wrapped.
        assert_eq!(
            Quantity::parse("9999999999999999999999999999999999999Ei"),
            None
        );
    }
}
