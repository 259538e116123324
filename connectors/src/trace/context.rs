//! The trace a record belongs to, read from its headers: W3C trace context (`traceparent`,
//! `tracestate`), or the requirements document's `x-trace-id` alias. Parsing is by hand:
//! the format is four fixed-width hex fields, and the opentelemetry crate's propagator wants
//! a string map (`Extractor`), which would mean copying every header of every record into one.

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";
pub const X_TRACE_ID: &str = "x-trace-id";

/// Hex digits to bytes; `None` on anything but exactly `2 * N` hex digits.
fn hex<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; N];
    for (i, pair) in s.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// A `traceparent` value (`00-<trace id>-<parent id>-<flags>`, W3C Trace Context level 1):
/// the remote parent span. Version `ff` and all-zero ids are invalid, as the spec says; a
/// future version is read by its first four fields.
pub fn parse_traceparent(v: &[u8], state: Option<&[u8]>) -> Option<SpanContext> {
    let v = v.trim_ascii();
    let mut parts = v.split(|b| *b == b'-');
    let version = hex::<1>(parts.next()?)?[0];
    let trace_id = hex::<16>(parts.next()?)?;
    let span_id = hex::<8>(parts.next()?)?;
    let flags = hex::<1>(parts.next()?)?[0];
    if version == 0xff || (version == 0 && parts.next().is_some()) {
        return None;
    }
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    let state = state
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        TraceId::from_bytes(trace_id),
        SpanId::from_bytes(span_id),
        TraceFlags::new(flags),
        true,
        state,
    ))
}

/// An `x-trace-id` value: 32 hex digits, or a UUID with dashes. It names a trace but no span,
/// so the broker's span hangs under a parent id derived from the trace id (the same for every
/// hop that only propagates `x-trace-id`, so they line up as siblings in the trace).
pub fn parse_x_trace_id(v: &[u8]) -> Option<SpanContext> {
    let compact: Vec<u8> = v
        .trim_ascii()
        .iter()
        .copied()
        .filter(|b| *b != b'-')
        .collect();
    let trace_id = hex::<16>(&compact)?;
    if trace_id == [0; 16] {
        return None;
    }
    let mut span_id = [0u8; 8];
    span_id.copy_from_slice(&trace_id[8..]);
    if span_id == [0; 8] {
        span_id[7] = 1;
    }
    Some(SpanContext::new(
        TraceId::from_bytes(trace_id),
        SpanId::from_bytes(span_id),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    ))
}

/// The trace a record's headers carry, `traceparent` first (the broker reads them from the
/// batch in place, the sinks from librdkafka's headers).
pub fn of_headers<'a>(
    headers: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
) -> Option<SpanContext> {
    let (mut parent, mut state, mut alias) = (None, None, None);
    for (k, v) in headers {
        match k {
            b"traceparent" => parent = parent.or(v),
            b"tracestate" => state = state.or(v),
            b"x-trace-id" => alias = alias.or(v),
            _ => {}
        }
    }
    parent
        .and_then(|p| parse_traceparent(p, state))
        .or_else(|| alias.and_then(parse_x_trace_id))
}

/// The `traceparent` value naming `c` as the parent (what a hop that sends a record on puts
/// in its headers).
pub fn traceparent(c: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        c.trace_id(),
        c.span_id(),
        c.trace_flags().to_u8()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn given_the_w3c_example_when_parsed_then_ids_and_flags() {
        let c = parse_traceparent(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            Some(b"congo=t61rcWkgMzE"),
        )
        .expect("valid");
        assert_eq!(c.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.span_id().to_string(), "00f067aa0ba902b7");
        assert!(c.is_sampled() && c.is_remote());
        assert_eq!(c.trace_state().get("congo"), Some("t61rcWkgMzE"));
    }

    #[test]
    fn given_invalid_traceparents_when_parsed_then_none() {
        for bad in [
            &b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"[..],
            b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
            b"",
        ] {
            assert!(parse_traceparent(bad, None).is_none(), "{bad:?}");
        }
        // A later version may add fields after the four it shares with 00.
        assert!(parse_traceparent(
            b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever",
            None
        )
        .is_some());
    }

    #[test]
    fn given_an_x_trace_id_when_parsed_then_its_trace_and_a_derived_parent() {
        let c = parse_x_trace_id(b"4bf92f35-77b3-4da6-a3ce-929d0e0e4736").expect("uuid");
        assert_eq!(c.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.span_id().to_string(), "a3ce929d0e0e4736");
        assert!(parse_x_trace_id(b"not-a-trace").is_none());
    }

    #[test]
    fn given_both_headers_when_read_then_traceparent_wins_and_the_alias_is_a_fallback() {
        let tp = &b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"[..];
        let alias = &b"11111111111111111111111111111111"[..];
        let both = [
            (&b"x-trace-id"[..], Some(alias)),
            (&b"traceparent"[..], Some(tp)),
        ];
        let c = of_headers(both).expect("traced");
        assert_eq!(c.span_id().to_string(), "00f067aa0ba902b7");
        let c = of_headers([(&b"x-trace-id"[..], Some(alias))]).expect("alias");
        assert_eq!(c.trace_id().to_string(), "11111111111111111111111111111111");
        assert!(of_headers([(&b"other"[..], Some(tp))]).is_none());
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(v in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse_traceparent(&v, Some(&v));
            let _ = parse_x_trace_id(&v);
        }

        #[test]
        fn formatted_ids_round_trip(t in any::<[u8; 16]>(), s in any::<[u8; 8]>(), f in any::<u8>()) {
            prop_assume!(t != [0; 16] && s != [0; 8]);
            let v = format!("00-{}-{}-{:02x}", TraceId::from_bytes(t), SpanId::from_bytes(s), f);
            let c = parse_traceparent(v.as_bytes(), None).expect("valid");
            prop_assert_eq!(c.trace_id(), TraceId::from_bytes(t));
            prop_assert_eq!(c.span_id(), SpanId::from_bytes(s));
            prop_assert_eq!(c.trace_flags(), TraceFlags::new(f));
            prop_assert_eq!(traceparent(&c), v);
        }
    }
}
