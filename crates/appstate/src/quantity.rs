//! Kubernetes resource quantities (`500m`, `128Mi`, `2`, `1e3`) in thousandths of their
//! unit, as Argo CD counts requests and capacities (`Quantity.MilliValue`).

/// `q` × 1000, rounded up as Kubernetes rounds `MilliValue`; 0 for what does not parse.
pub fn milli_value(q: &str) -> i64 {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let Ok(n) = number.parse::<f64>() else {
        return 0;
    };
    let factor: f64 = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => match s[1..].parse::<i32>() {
            Ok(exp) => 10f64.powi(exp),
            Err(_) => return 0,
        },
        _ => return 0,
    };
    let milli = (n * factor * 1000.0).ceil();
    if milli.is_finite() { milli as i64 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::milli_value;

    #[test]
    fn suffixes_scale_to_thousandths() {
        assert_eq!(milli_value("500m"), 500);
        assert_eq!(milli_value("2"), 2000);
        assert_eq!(milli_value("1.5"), 1500);
        assert_eq!(milli_value("128Mi"), 128 * 1024 * 1024 * 1000);
        assert_eq!(milli_value("1k"), 1_000_000);
        assert_eq!(milli_value("1e3"), 1_000_000);
        assert_eq!(milli_value("100u"), 1);
        assert_eq!(milli_value("lots"), 0);
    }
}
