//! Figures written for people, the same in tables, headlines and chart labels: counts with
//! thousands separators, bytes in binary units, amounts with their currency.

/// `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The binary units bytes are given in, each 1024 times the one before.
pub const BYTE_UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/// The largest binary unit `n` bytes reach (at least one of it), as its index in [`BYTE_UNITS`].
pub fn byte_unit(n: f64) -> usize {
    let mut unit = 0;
    let mut value = n.abs();
    while value >= 1024.0 && unit < BYTE_UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    unit
}

/// Bytes in binary units: `512 B`, `1.50 KiB`, `20.0 MiB`, `3.25 GiB`.
pub fn bytes(n: u64) -> String {
    let unit = byte_unit(n as f64);
    let value = n as f64 / 1024f64.powi(unit as i32);
    if unit == 0 {
        format!("{n} B")
    } else if value < 10.0 {
        format!("{value:.2} {}", BYTE_UNITS[unit])
    } else {
        format!("{value:.1} {}", BYTE_UNITS[unit])
    }
}

/// An amount with its currency: four decimals under 10 (the advisor's small savings), else two
/// with thousands separators: `0.0123 USD`, `1,234.50 USD`.
pub fn money(amount: f64, currency: &str) -> String {
    if amount.abs() < 0.00005 {
        // No "-0.0000" for a rounding error below a hundredth of a cent.
        format!("{:.4} {currency}", 0.0)
    } else if amount.abs() < 10.0 {
        format!("{amount:.4} {currency}")
    } else {
        let cents = (amount.abs() * 100.0).round() as u64;
        let sign = if amount < 0.0 { "-" } else { "" };
        format!("{sign}{}.{:02} {currency}", count(cents / 100), cents % 100)
    }
}

/// A share as a percentage with one decimal, `-` when unknown.
pub fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_owned(), |s| format!("{:.1}%", s * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_for_people() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(20 << 20), "20.0 MiB");
        assert_eq!(bytes(300 << 40), "300.0 TiB");
        assert_eq!(byte_unit(5.0 * 1024.0 * 1024.0 * 1024.0), 3);
        assert_eq!(money(0.01234, "USD"), "0.0123 USD");
        assert_eq!(money(-0.000001, "USD"), "0.0000 USD");
        assert_eq!(money(-0.0012, "USD"), "-0.0012 USD");
        assert_eq!(money(1234.5, "USD"), "1,234.50 USD");
        assert_eq!(money(-1234.5, "EUR"), "-1,234.50 EUR");
        assert_eq!(percent(Some(0.5)), "50.0%");
        assert_eq!(percent(None), "-");
    }
}
