//! Subscriptions by regular expression (KIP-848 `SubscribedTopicRegex`), resolved as Kafka 4's
//! group coordinator resolves them (`GroupMetadataManager.maybeUpdateRegularExpressions`,
//! `TopicRegexResolver`):
//!
//! - **Per group, with one principal's rights.** A regex resolves to the existing topics it
//!   matches that the principal of the heartbeat doing the resolution may DESCRIBE (every
//!   topic without an authorizer), and every member subscribed to that regex shares the
//!   resolution. All the group's regexes are resolved together, by whichever member's
//!   heartbeat finds them due — in Kafka too, a member with fewer rights may resolve a regex
//!   another member brought.
//! - **When.** On a heartbeat (the only time a principal is at hand; the group's timers never
//!   resolve): at once for a regex the group has no resolution of; otherwise, not within
//!   `MIN_REGEX_REFRESH_INTERVAL_MS` of the last resolution, when a topic was created since
//!   (`RegexResolver::topics_version`, Kafka's `lastMetadataImageWithNewTopics`) or when the
//!   last resolution is older than `group.consumer.regex.refresh.interval.ms` (default 10
//!   minutes). An ACL change has no trigger of its own, in Kafka either: a grant or a
//!   revocation shows at the next of those refreshes. A deleted topic needs none: effective
//!   subscriptions keep only existing topics.
//! - **Durable.** Each resolution is written as Kafka's record 16 (topics, version, time) and
//!   replayed at a load, so a loaded group assigns what it was resolved to — never a match
//!   made without a principal — until a heartbeat resolves again. A loaded resolution counts
//!   as older than any topic (Kafka's image offsets restart the comparison after a failover
//!   too), so the first heartbeat past the minimum interval resolves again. A group logged
//!   before Strom wrote record 16 is seeded from its targets instead (`persist`).
//!
//! Where Strom differs: Kafka resolves in the background and the member sees the result at a
//! later heartbeat; here the resolution is made in the heartbeat that finds it due (matching
//! names against a compiled RE2-family program is cheap), and a regex the group has no
//! resolution of does not wait for the minimum interval.

use std::collections::BTreeMap;

use super::ConsumerGroup;
use crate::coordinator::group::records::ResolvedRegex;
use crate::coordinator::group::topic_regex::TopicRegex;

/// Kafka's `REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`: the least time between two resolutions of a
/// group's regexes (a regex not resolved yet excepted), and the least value of
/// `group.consumer.regex.refresh.interval.ms`.
pub const MIN_REGEX_REFRESH_INTERVAL_MS: i64 = 10_000;

/// The version of a resolution replayed from the log: below every version a shard hands out,
/// so it is resolved again as soon as the minimum interval allows.
pub(super) const LOADED_VERSION: i64 = -1;

/// What a heartbeat brings to resolve its group's regexes with.
pub struct RegexResolver<'a> {
    /// Whether the heartbeat's principal may DESCRIBE the topic (always, with no authorizer).
    pub may_describe: &'a dyn Fn(&str) -> bool,
    /// Moves whenever a topic appears in the catalog; a resolution made at a lower version
    /// may be missing a topic.
    pub topics_version: i64,
}

impl RegexResolver<'static> {
    /// No authorizer, and a catalog that never gains a topic (tests).
    #[cfg(test)]
    pub fn everything() -> RegexResolver<'static> {
        RegexResolver {
            may_describe: &|_| true,
            topics_version: 0,
        }
    }
}

impl ConsumerGroup {
    /// Forgets the resolutions no member is subscribed to any more (`take_records` writes
    /// their tombstones, as Kafka does when the last subscriber of a regex goes).
    pub(super) fn prune_regexes(&mut self) {
        let members = &self.members;
        self.regexes
            .retain(|re, _| members.values().any(|m| m.regex.as_ref() == Some(re)));
    }

    /// Resolves every subscribed regex against `topics` if they are due (module doc); moves
    /// the group epoch when a resolution changed.
    pub(super) fn maybe_resolve_regexes(
        &mut self,
        topics: &BTreeMap<String, i32>,
        now: i64,
        refresh_interval_ms: i64,
        resolver: &RegexResolver<'_>,
    ) {
        self.prune_regexes();
        let mut subscribed: BTreeMap<&str, &TopicRegex> = BTreeMap::new();
        for m in self.members.values() {
            if let (Some(re), Some(compiled)) = (&m.regex, &m.compiled) {
                subscribed.entry(re.as_str()).or_insert(compiled);
            }
        }
        if subscribed.is_empty() {
            return;
        }
        let unresolved = subscribed.keys().any(|re| !self.regexes.contains_key(*re));
        let last = self.regexes.values().map(|r| r.timestamp).max();
        let due = last.is_none_or(|last| {
            now > last.saturating_add(MIN_REGEX_REFRESH_INTERVAL_MS)
                && (now > last.saturating_add(refresh_interval_ms)
                    || self
                        .regexes
                        .values()
                        .any(|r| r.version < resolver.topics_version))
        });
        if !unresolved && !due {
            return;
        }
        let resolved: Vec<(String, ResolvedRegex)> = subscribed
            .iter()
            .map(|(re, compiled)| {
                let topics = topics
                    .keys()
                    .filter(|t| compiled.matches(t) && (resolver.may_describe)(t))
                    .cloned()
                    .collect();
                let r = ResolvedRegex {
                    topics,
                    version: resolver.topics_version,
                    timestamp: now,
                };
                (re.to_string(), r)
            })
            .collect();
        let mut changed = false;
        for (re, r) in resolved {
            changed |= self.regexes.get(&re).map(|old| &old.topics) != Some(&r.topics);
            self.regexes.insert(re, r);
        }
        if changed {
            let sizes: Vec<(&String, usize)> = self
                .regexes
                .iter()
                .map(|(re, r)| (re, r.topics.len()))
                .collect();
            tracing::debug!(regexes = ?sizes, "consumer group regexes resolved to new topics");
            self.bump();
        }
    }
}
