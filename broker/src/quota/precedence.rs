//! Kafka's `DefaultQuotaCallback`: which configured quota applies to a (user, client id), and
//! which clients share its rate (module overview of `quota`). Two steps, as in Kafka:
//! `metric_tags` walks the 8 levels for the first entity that has the key and answers the
//! tags of that level; `limit` looks the bound up from the tags.

use crate::metadata::quotas::{QuotaEntity, Quotas, CLIENT_ID, USER};

fn key_of(user: Option<Option<&str>>, client: Option<Option<&str>>) -> QuotaEntity {
    let mut e = QuotaEntity::new();
    if let Some(u) = user {
        e.insert(USER.to_string(), u.map(str::to_string));
    }
    if let Some(c) = client {
        e.insert(CLIENT_ID.to_string(), c.map(str::to_string));
    }
    e
}

fn has(
    quotas: &Quotas,
    key: &str,
    user: Option<Option<&str>>,
    client: Option<Option<&str>>,
) -> bool {
    quotas
        .get(&key_of(user, client))
        .is_some_and(|v| v.contains_key(key))
}

fn get(
    quotas: &Quotas,
    key: &str,
    user: Option<Option<&str>>,
    client: Option<Option<&str>>,
) -> Option<f64> {
    quotas
        .get(&key_of(user, client))
        .and_then(|v| v.get(key))
        .copied()
}

/// Kafka's `quotaMetricTags`: (user tag, client-id tag) of the most specific level that
/// configures `key` for this client; ("", client) when none does.
pub fn metric_tags(quotas: &Quotas, key: &str, user: &str, client: &str) -> (String, String) {
    let (u, c) = (Some(Some(user)), Some(Some(client)));
    let (du, dc) = (Some(None), Some(None));
    let both = (user.to_string(), client.to_string());
    let user_only = (user.to_string(), String::new());
    if has(quotas, key, u, c) || has(quotas, key, u, dc) {
        return both; // 1, 2
    }
    if has(quotas, key, u, None) {
        return user_only; // 3
    }
    if has(quotas, key, du, c) || has(quotas, key, du, dc) {
        return both; // 4, 5
    }
    if has(quotas, key, du, None) {
        return user_only; // 6
    }
    (String::new(), client.to_string()) // 7, 8
}

/// Kafka's `quotaLimit`: the bound for sensors with these tags, if one is configured.
pub fn limit(quotas: &Quotas, key: &str, user_tag: &str, client_tag: &str) -> Option<f64> {
    let (u, c) = (Some(Some(user_tag)), Some(Some(client_tag)));
    let (du, dc) = (Some(None), Some(None));
    match (user_tag.is_empty(), client_tag.is_empty()) {
        (false, false) => get(quotas, key, u, c)
            .or_else(|| get(quotas, key, u, dc))
            .or_else(|| get(quotas, key, du, c))
            .or_else(|| get(quotas, key, du, dc)),
        (false, true) => get(quotas, key, u, None).or_else(|| get(quotas, key, du, None)),
        (true, false) => get(quotas, key, None, c).or_else(|| get(quotas, key, None, dc)),
        (true, true) => None,
    }
}

/// The sensor tags and bound for a client, or `None` when no quota applies to it.
pub fn resolve(
    quotas: &Quotas,
    key: &str,
    user: &str,
    client: &str,
) -> Option<(String, String, f64)> {
    let (ut, ct) = metric_tags(quotas, key, user, client);
    let bound = limit(quotas, key, &ut, &ct)?;
    Some((ut, ct, bound))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::quotas::{entity, PRODUCER_BYTE_RATE as P};

    /// An entity as `(type, name)` pairs, and its produce quota.
    type Level<'a> = (&'a [(&'a str, Option<&'a str>)], f64);

    fn quotas(levels: &[Level]) -> Quotas {
        levels
            .iter()
            .map(|(e, v)| (entity(e), [(P.to_string(), *v)].into()))
            .collect()
    }

    const ALL: &[Level] = &[
        (&[(USER, Some("alice")), (CLIENT_ID, Some("app"))], 1.0),
        (&[(USER, Some("alice")), (CLIENT_ID, None)], 2.0),
        (&[(USER, Some("alice"))], 3.0),
        (&[(USER, None), (CLIENT_ID, Some("app"))], 4.0),
        (&[(USER, None), (CLIENT_ID, None)], 5.0),
        (&[(USER, None)], 6.0),
        (&[(CLIENT_ID, Some("app"))], 7.0),
        (&[(CLIENT_ID, None)], 8.0),
    ];

    #[test]
    fn given_all_eight_levels_when_removing_the_most_specific_each_time_then_kafkas_order() {
        let expected_tags = [
            ("alice", "app"),
            ("alice", "app"),
            ("alice", ""),
            ("alice", "app"),
            ("alice", "app"),
            ("alice", ""),
            ("", "app"),
            ("", "app"),
        ];
        for level in 0..ALL.len() {
            let q = quotas(&ALL[level..]);
            let (ut, ct, bound) = resolve(&q, P, "alice", "app").unwrap();
            assert_eq!(bound, (level + 1) as f64, "level {}", level + 1);
            assert_eq!(
                (ut.as_str(), ct.as_str()),
                expected_tags[level],
                "level {}",
                level + 1
            );
        }
    }

    #[test]
    fn given_quotas_of_other_entities_when_resolving_then_only_matching_ones_apply() {
        let q = quotas(&[
            (&[(USER, Some("bob"))], 1.0),
            (&[(CLIENT_ID, Some("other"))], 2.0),
        ]);
        assert!(resolve(&q, P, "alice", "app").is_none());
        assert_eq!(resolve(&q, P, "bob", "app").unwrap().2, 1.0);
        assert_eq!(resolve(&q, P, "alice", "other").unwrap().2, 2.0);
        // Another key's quota is no produce quota.
        let other_key: Quotas = [(
            entity(&[(CLIENT_ID, None)]),
            [("consumer_byte_rate".to_string(), 9.0)].into(),
        )]
        .into();
        assert!(resolve(&other_key, P, "alice", "app").is_none());
    }

    #[test]
    fn given_a_user_default_and_a_client_default_when_resolving_then_user_level_shares_one_sensor()
    {
        let q = quotas(&[(&[(USER, None)], 6.0), (&[(CLIENT_ID, None)], 8.0)]);
        // Level 6 wins over 8; all clients of one user share its rate.
        assert_eq!(
            resolve(&q, P, "alice", "a"),
            Some(("alice".into(), String::new(), 6.0))
        );
        assert_eq!(
            resolve(&q, P, "alice", "b"),
            Some(("alice".into(), String::new(), 6.0))
        );
        // A client-id default: one sensor per client id.
        let q = quotas(&[(&[(CLIENT_ID, None)], 8.0)]);
        assert_eq!(
            resolve(&q, P, "alice", "a"),
            Some((String::new(), "a".into(), 8.0))
        );
    }
}
