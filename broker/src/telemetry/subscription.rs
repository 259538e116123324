//! One CLIENT_METRICS config resource (KIP-714): which metrics the clients it matches push,
//! and how often. Kafka's `ClientMetricsConfigs`: three keys, `metrics` (a list of metric
//! name prefixes, `*` for all), `interval.ms` (100 ms to 1 h, default 5 min) and `match`
//! (`attribute=regex` per entry, every entry must match the whole attribute), validated with
//! Kafka's error kinds: an unknown key or an interval out of range is an invalid request, a
//! bad match pattern an invalid config.

use std::collections::BTreeMap;

use regex::Regex;

pub const METRICS: &str = "metrics";
pub const INTERVAL_MS: &str = "interval.ms";
pub const MATCH: &str = "match";
/// The three keys, in the order DescribeConfigs lists what is set.
pub const KEYS: [&str; 3] = [METRICS, INTERVAL_MS, MATCH];
/// `metrics=*`: every metric the client has.
pub const ALL_METRICS: &str = "*";
pub const DEFAULT_INTERVAL_MS: i32 = 5 * 60 * 1000;
const MIN_INTERVAL_MS: i32 = 100;
const MAX_INTERVAL_MS: i32 = 3_600_000;

/// The client attributes a `match` entry may name (Kafka's `ALLOWED_MATCH_PARAMS`).
pub const MATCH_ATTRIBUTES: [&str; 6] = [
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
];

/// What a `match` is tested against: one client instance's attributes, by name.
pub trait Attributes {
    fn attribute(&self, name: &str) -> Option<&str>;
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SubscriptionError {
    /// INVALID_REQUEST in Kafka (`InvalidRequestException`).
    #[error("{0}")]
    InvalidRequest(String),
    /// INVALID_CONFIG in Kafka (`InvalidConfigurationException`, `ConfigException`).
    #[error("{0}")]
    InvalidConfig(String),
}

#[derive(Debug, Clone)]
pub struct Subscription {
    pub metrics: Vec<String>,
    pub interval_ms: i32,
    /// (attribute, whole-value regex); all must match.
    matches: Vec<(String, Regex)>,
}

/// Kafka's LIST type: comma-separated, each entry trimmed, "" is the empty list.
fn list(value: &str) -> Vec<String> {
    if value.trim().is_empty() {
        return Vec::new();
    }
    value.split(',').map(|s| s.trim().to_string()).collect()
}

impl Subscription {
    /// Validates a subscription's whole config, as Kafka does after every alter.
    pub fn parse(
        name: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<Subscription, SubscriptionError> {
        if name.is_empty() {
            return Err(SubscriptionError::InvalidRequest(
                "Subscription name can't be empty".into(),
            ));
        }
        if let Some(key) = configs.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(SubscriptionError::InvalidRequest(format!(
                "Unknown client metrics configuration: {key}"
            )));
        }
        let interval_ms = match configs.get(INTERVAL_MS) {
            None => DEFAULT_INTERVAL_MS,
            Some(v) => {
                let ms: i32 = v.trim().parse().map_err(|_| {
                    SubscriptionError::InvalidConfig(format!(
                        "Invalid value {v} for configuration {INTERVAL_MS}: Not a number of type INT"
                    ))
                })?;
                if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&ms) {
                    return Err(SubscriptionError::InvalidRequest(format!(
                        "Invalid value {ms} for {INTERVAL_MS}, interval must be between 100 and 3600000 (1 hour)"
                    )));
                }
                ms
            }
        };
        let matches = configs
            .get(MATCH)
            .map(|v| list(v))
            .unwrap_or_default()
            .iter()
            .map(|p| parse_match(p))
            .collect::<Result<_, _>>()?;
        Ok(Subscription {
            metrics: configs.get(METRICS).map(|v| list(v)).unwrap_or_default(),
            interval_ms,
            matches,
        })
    }

    pub fn matches(&self, client: &dyn Attributes) -> bool {
        self.matches.iter().all(|(attribute, re)| {
            client
                .attribute(attribute)
                .is_some_and(|value| re.is_match(value))
        })
    }
}

/// `attribute=regex`, split at `=` as Kafka does (so a regex may not contain one).
fn parse_match(pattern: &str) -> Result<(String, Regex), SubscriptionError> {
    let illegal =
        || SubscriptionError::InvalidConfig(format!("Illegal client matching pattern: {pattern}"));
    let parts: Vec<&str> = pattern.split('=').collect();
    let [attribute, regex] = parts.as_slice() else {
        return Err(illegal());
    };
    let attribute = attribute.trim();
    if !MATCH_ATTRIBUTES.contains(&attribute) {
        return Err(illegal());
    }
    // Java's `Matcher.matches()`: the whole value. The regex crate runs in linear time, so a
    // pattern cannot make the broker backtrack on a hostile client id.
    let regex = Regex::new(&format!("^(?:{})$", regex.trim())).map_err(|_| illegal())?;
    Ok((attribute.to_string(), regex))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Client(Vec<(&'static str, &'static str)>);

    impl Attributes for Client {
        fn attribute(&self, name: &str) -> Option<&str> {
            self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
        }
    }

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn given_kafkas_keys_when_parsed_then_lists_trimmed_and_interval_defaulted() {
        let s = Subscription::parse(
            "s",
            &configs(&[(
                "metrics",
                " org.apache.kafka.producer. , org.apache.kafka.consumer.",
            )]),
        )
        .unwrap();
        assert_eq!(
            s.metrics,
            ["org.apache.kafka.producer.", "org.apache.kafka.consumer."]
        );
        assert_eq!(s.interval_ms, DEFAULT_INTERVAL_MS);
        assert!(Subscription::parse("s", &configs(&[("metrics", "")]))
            .unwrap()
            .metrics
            .is_empty());
    }

    #[test]
    fn given_bad_configs_when_parsed_then_kafkas_error_kinds() {
        let err = |pairs: &[(&str, &str)]| Subscription::parse("s", &configs(pairs)).unwrap_err();
        assert!(matches!(
            Subscription::parse("", &configs(&[])),
            Err(SubscriptionError::InvalidRequest(_))
        ));
        assert_eq!(
            err(&[("nope", "1")]),
            SubscriptionError::InvalidRequest("Unknown client metrics configuration: nope".into())
        );
        assert!(matches!(
            err(&[("interval.ms", "99")]),
            SubscriptionError::InvalidRequest(_)
        ));
        assert!(matches!(
            err(&[("interval.ms", "3600001")]),
            SubscriptionError::InvalidRequest(_)
        ));
        assert!(matches!(
            err(&[("interval.ms", "soon")]),
            SubscriptionError::InvalidConfig(_)
        ));
        for bad in ["client_id", "client_id=a=b", "rack=x", "client_id=("] {
            assert_eq!(
                err(&[("match", bad)]),
                SubscriptionError::InvalidConfig(format!("Illegal client matching pattern: {bad}"))
            );
        }
        assert_eq!(
            Subscription::parse("s", &configs(&[("interval.ms", "100")]))
                .unwrap()
                .interval_ms,
            100
        );
    }

    #[test]
    fn given_match_entries_when_tested_then_all_must_match_the_whole_value() {
        let s = Subscription::parse(
            "s",
            &configs(&[("match", "client_id=app-.*, client_software_name=librdkafka")]),
        )
        .unwrap();
        let client = |id, name| Client(vec![("client_id", id), ("client_software_name", name)]);
        assert!(s.matches(&client("app-1", "librdkafka")));
        assert!(!s.matches(&client("my-app-1", "librdkafka")));
        assert!(!s.matches(&client("app-1", "librdkafka-x")));
        assert!(!s.matches(&Client(vec![("client_id", "app-1")])));
        // No match entries: every client.
        assert!(Subscription::parse("s", &configs(&[]))
            .unwrap()
            .matches(&Client(vec![])));
    }
}
