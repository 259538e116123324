//! Per-record expiry (Strom's `strom.ttl.header` / `strom.record.ttl.ms`, JetStream's
//! per-message TTL): the one rule that both the broker's fetch path (which skips expired
//! records) and the cleaner (which removes them from compacted logs) apply, so the two can
//! never disagree on when a record is gone.
//!
//! A record expires at its timestamp plus its TTL: the value of the configured header where
//! the record carries it (milliseconds, ASCII digits), else the topic default. A header value
//! that is not a number is no TTL (the produce path refuses such records where expiry is
//! configured, so only records written before the config was set can carry one).

use crate::batch::BatchHeader;

/// A topic's expiry settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordExpiry {
    /// The header holding a record's TTL (ms), when the topic names one.
    pub header: Option<String>,
    /// The TTL of records without the header (ms), when the topic sets one.
    pub default_ttl_ms: Option<i64>,
}

impl RecordExpiry {
    /// When the record expires (ms since the epoch), or None when it never does. `header`
    /// looks up a header of the record by name: `Some(None)` for a present, null value.
    pub fn expires_at<'a>(
        &self,
        batch: &BatchHeader,
        timestamp_delta: i64,
        header: impl FnOnce(&str) -> Option<Option<&'a [u8]>>,
    ) -> Option<i64> {
        let from_header = self
            .header
            .as_deref()
            .and_then(header)
            .flatten()
            .and_then(parse_ttl);
        from_header
            .or(self.default_ttl_ms)
            .map(|ttl| record_timestamp(batch, timestamp_delta).saturating_add(ttl))
    }
}

/// A record's timestamp: the batch's max timestamp under LogAppendTime (the broker's clock
/// at append, as Kafka reads it), else base timestamp + the record's delta. (A batch
/// carrying a KIP-534 delete horizon has its deltas shifted with its base, so the sum is
/// still the record's own timestamp.)
pub fn record_timestamp(batch: &BatchHeader, timestamp_delta: i64) -> i64 {
    if batch.timestamp_type_log_append() {
        batch.max_timestamp
    } else {
        batch.base_timestamp.saturating_add(timestamp_delta)
    }
}

/// A TTL header's value: milliseconds as ASCII digits, as JetStream's `Nats-TTL` without
/// its unit suffixes (a Kafka header is bytes; digits are what every client can write).
pub fn parse_ttl(value: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(value).ok()?.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_ttl_values_when_parsed_then_only_digits_count() {
        assert_eq!(parse_ttl(b"1500"), Some(1500));
        assert_eq!(parse_ttl(b" 7 "), Some(7));
        for bad in [
            &b""[..],
            b"-5",
            b"1.5",
            b"abc",
            b"\xff",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_ttl(bad), None, "{bad:?}");
        }
    }
}
