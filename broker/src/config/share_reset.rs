//! `share.auto.offset.reset`: where a share partition starts when it has no state yet —
//! `earliest`, `latest` (Kafka's default) or `by_duration:<ISO-8601 duration>` (KIP-1106),
//! the first record written at or after that long ago.
//!
//! Kafka parses the value with `AutoOffsetResetStrategy.fromString`: the names are
//! case-sensitive and the duration is `java.time.Duration.parse`'s grammar (days, hours,
//! minutes, seconds with up to nine decimals, each part signed; no years or months), and a
//! negative total is refused. A general ISO-8601 crate would accept years, months and weeks,
//! which Kafka refuses, so the small grammar is parsed here. The share coordinator reads
//! the parsed value (`coordinator::share::ShareConfig`).

/// Where a share partition starts when it has no state yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// The first record whose timestamp is at or after now minus this many milliseconds.
    ByDuration(i64),
}

const BY_DURATION: &str = "by_duration";

impl OffsetReset {
    /// Kafka's `ShareGroupAutoOffsetResetStrategy.fromString`, with its messages.
    pub fn parse(value: &str) -> Result<OffsetReset, String> {
        let value = value.trim();
        match value {
            "earliest" => return Ok(OffsetReset::Earliest),
            "latest" => return Ok(OffsetReset::Latest),
            BY_DURATION => {
                return Err(
                    "<:duration> part is missing in by_duration auto offset reset strategy.".into(),
                )
            }
            _ => {}
        }
        let Some(duration) = value
            .strip_prefix(BY_DURATION)
            .and_then(|rest| rest.strip_prefix(':'))
        else {
            return Err(format!("Unknown auto offset reset strategy: {value}"));
        };
        match java_duration_ms(duration) {
            Some(ms) if ms < 0 => Err(
                "Negative duration is not supported in by_duration offset reset strategy.".into(),
            ),
            Some(ms) => Ok(OffsetReset::ByDuration(ms)),
            None => {
                Err("Unable to parse duration string in by_duration offset reset strategy.".into())
            }
        }
    }
}

/// `java.time.Duration.parse(text).toMillis()`: `[-+]P[nD][T[nH][nM][n[.f]S]]`, letters in
/// either case, each number signed, at least one part, `T` followed by at least one part.
/// None where Java throws (bad text or overflow).
fn java_duration_ms(text: &str) -> Option<i64> {
    let upper = text.to_ascii_uppercase();
    let (negate, rest) = match upper.as_bytes().first()? {
        b'-' => (true, &upper[1..]),
        b'+' => (false, &upper[1..]),
        _ => (false, &upper[..]),
    };
    let rest = rest.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut nanos: i128 = 0;
    let mut parts = 0;
    if !date.is_empty() {
        let days = date.strip_suffix('D')?;
        nanos += signed_int(days)? * 86_400 * 1_000_000_000;
        parts += 1;
    }
    if let Some(mut t) = time {
        if t.is_empty() {
            return None;
        }
        for (unit, scale) in [('H', 3_600i128), ('M', 60)] {
            if let Some(i) = t.find(unit) {
                nanos += signed_int(&t[..i])? * scale * 1_000_000_000;
                t = &t[i + 1..];
                parts += 1;
            }
        }
        if !t.is_empty() {
            let secs = t.strip_suffix('S')?;
            let (whole, frac) = match secs.split_once(['.', ',']) {
                Some((w, f)) => (w, Some(f)),
                None => (secs, None),
            };
            let whole = signed_int(whole)?;
            let mut part = whole * 1_000_000_000;
            if let Some(f) = frac {
                if f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let digits: i128 = if f.is_empty() { 0 } else { f.parse().ok()? };
                let frac_nanos = digits * 10i128.pow(9 - f.len() as u32);
                // Java gives the fraction the seconds' sign, "-0.5" included.
                part += if secs.starts_with('-') {
                    -frac_nanos
                } else {
                    frac_nanos
                };
            }
            nanos += part;
            parts += 1;
        }
    }
    if parts == 0 {
        return None;
    }
    let nanos = if negate { -nanos } else { nanos };
    // Duration holds seconds in an i64; toMillis floors and throws past i64 milliseconds.
    let ms = nanos.div_euclid(1_000_000);
    i64::try_from(ms).ok()
}

/// Java's `Long.parseLong` of one part: an optional sign and at least one digit.
fn signed_int(text: &str) -> Option<i128> {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 19 {
        return None;
    }
    let v: i128 = digits.parse().ok()?;
    i64::try_from(v).ok()?;
    Some(if text.starts_with('-') { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_kafka_names_when_parsing_then_case_matters_as_in_kafka() {
        assert_eq!(OffsetReset::parse("earliest"), Ok(OffsetReset::Earliest));
        assert_eq!(OffsetReset::parse(" latest "), Ok(OffsetReset::Latest));
        assert_eq!(
            OffsetReset::parse("LATEST"),
            Err("Unknown auto offset reset strategy: LATEST".into())
        );
        assert_eq!(
            OffsetReset::parse("by_duration"),
            Err("<:duration> part is missing in by_duration auto offset reset strategy.".into())
        );
    }

    #[test]
    fn given_java_durations_when_parsing_then_milliseconds_as_java_computes_them() {
        let ms = |s: &str| match OffsetReset::parse(&format!("by_duration:{s}")) {
            Ok(OffsetReset::ByDuration(ms)) => Some(ms),
            _ => None,
        };
        assert_eq!(ms("PT1H"), Some(3_600_000));
        assert_eq!(ms("pt15m"), Some(900_000));
        assert_eq!(ms("P1DT2H3M4.5S"), Some(93_784_500));
        assert_eq!(ms("PT0.001S"), Some(1));
        assert_eq!(ms("PT1,25S"), Some(1_250));
        assert_eq!(ms("PT1H-30M"), Some(1_800_000));
        assert_eq!(ms("+PT0S"), Some(0));
        assert_eq!(ms("P2D"), Some(172_800_000));
    }

    #[test]
    fn given_bad_or_negative_durations_when_parsing_then_kafkas_messages() {
        let err = |s: &str| OffsetReset::parse(&format!("by_duration:{s}")).unwrap_err();
        let unparsable = "Unable to parse duration string in by_duration offset reset strategy.";
        for bad in [
            "",
            "P",
            "PT",
            "1H",
            "P1Y",
            "P1W",
            "PT1.0000000001S",
            "PTH",
            "P1DT",
            "PT1S2M",
        ] {
            assert_eq!(err(bad), unparsable, "{bad}");
        }
        let negative = "Negative duration is not supported in by_duration offset reset strategy.";
        assert_eq!(err("-PT1H"), negative);
        assert_eq!(err("PT-0.5S"), negative);
    }
}
