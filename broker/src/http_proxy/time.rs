//! ISO 8601 timestamps in UTC, as Confluent's v3 API writes (`2024-01-31T12:00:00.123Z`)
//! and reads them. Civil-date arithmetic after Howard Hinnant's `days_from_civil`.

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.sssZ`.
pub fn iso8601(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z")
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` (or `+00:00`) to milliseconds since the epoch.
pub fn parse_iso8601(s: &str) -> Option<i64> {
    let s = s.strip_suffix('Z').or_else(|| s.strip_suffix("+00:00"))?;
    let (date, time) = s.split_once('T')?;
    let mut dp = date.splitn(3, '-');
    let y: i64 = dp.next()?.parse().ok()?;
    let m: i64 = dp.next()?.parse().ok()?;
    let d: i64 = dp.next()?.parse().ok()?;
    let (hms, frac) = match time.split_once('.') {
        Some((a, f)) => (a, f),
        None => (time, ""),
    };
    let mut tp = hms.splitn(3, ':');
    let h: i64 = tp.next()?.parse().ok()?;
    let min: i64 = tp.next()?.parse().ok()?;
    let sec: i64 = tp.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || h > 23 || min > 59 || sec > 60 {
        return None;
    }
    let milli: i64 = if frac.is_empty() {
        0
    } else {
        if !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        format!("{frac:0<3}")[..3].parse().ok()?
    };
    let days = days_from_civil(y, m, d);
    Some(((days * 24 + h) * 60 + min) * 60_000 + sec * 1000 + milli)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_epoch_millis_then_iso_and_back() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_612_552_482_123), "2021-02-05T19:14:42.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        for ms in [0, 1_612_552_482_123, 951_782_400_000, 4_102_444_799_999] {
            assert_eq!(parse_iso8601(&iso8601(ms)), Some(ms));
        }
        assert_eq!(
            parse_iso8601("2021-02-05T19:14:42Z"),
            Some(1_612_552_482_000)
        );
        assert_eq!(
            parse_iso8601("2021-02-05T19:14:42.1+00:00"),
            Some(1_612_552_482_100)
        );
        assert_eq!(parse_iso8601("2021-13-05T19:14:42Z"), None);
        assert_eq!(parse_iso8601("yesterday"), None);
    }
}
