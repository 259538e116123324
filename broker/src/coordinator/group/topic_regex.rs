//! Topic subscription patterns of the KIP-848 protocol (`subscribed_topic_regex`), and the
//! other patterns Kafka matches against whole names (ListTransactions' KIP-1152 pattern).
//! Kafka evaluates them with RE2J; the `regex` crate is the same RE2 family — linear time,
//! no backtracking, so no pattern can stall a shard — and matches the whole name here as
//! RE2J's `Matcher.matches` does (the pattern is anchored as `^(?:pattern)$`).

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid regular expression: {message}")]
pub struct RegexError {
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct TopicRegex {
    whole: regex::Regex,
}

/// Compiled-program bound: far beyond any subscription pattern, small enough that a hostile
/// one is refused (INVALID_REGULAR_EXPRESSION) instead of taking the shard's memory.
const SIZE_LIMIT: usize = 1 << 20;

impl TopicRegex {
    pub fn parse(pattern: &str) -> Result<TopicRegex, RegexError> {
        regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(SIZE_LIMIT)
            .build()
            .map(|whole| TopicRegex { whole })
            .map_err(|e| RegexError {
                message: e.to_string(),
            })
    }

    /// Whether the whole of `s` matches (Java's `Matcher.matches`).
    pub fn matches(&self, s: &str) -> bool {
        self.whole.is_match(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(p: &str, s: &str) -> bool {
        TopicRegex::parse(p).unwrap().matches(s)
    }

    #[test]
    fn given_common_subscription_patterns_when_matching_whole_names_then_like_java() {
        assert!(matches("orders", "orders"));
        assert!(!matches("orders", "orders-eu"), "whole-name match");
        assert!(matches("orders.*", "orders-eu"));
        assert!(matches("^logs-[a-z]+-\\d{2}$", "logs-web-07"));
        assert!(!matches("^logs-[a-z]+-\\d{2}$", "logs-web-7"));
        assert!(matches("(a|b)+c?", "abba"));
        assert!(matches("[^.]+\\.events", "shop.events"));
        assert!(!matches("[^.]+\\.events", "a.shop.events"));
        assert!(matches("t[0-9_-]*", "t-1_2"));
        assert!(matches("x{2,}", "xxxx") && !matches("x{2,3}", "xxxx"));
        assert!(matches("(?:foo)?bar", "bar"));
        assert!(matches("a*?b", "aab"));
    }

    #[test]
    fn given_bad_or_pathological_patterns_then_error_or_linear_no_match() {
        for bad in ["(", "a)", "[a-", "*a", "x{3,1}", "\\q"] {
            assert!(TopicRegex::parse(bad).is_err(), "{bad}");
        }
        // Catastrophic for a backtracking matcher; linear here.
        let evil = TopicRegex::parse("(a*)*(a*)*(a*)*b").unwrap();
        assert!(!evil.matches(&"a".repeat(200)));
        // An alternation that would close off the anchors stays inside them.
        assert!(!matches("a|b", "ab") && matches("a|b", "b"));
        assert!(
            TopicRegex::parse(&"(x{1000}){1000}".repeat(5)).is_err(),
            "over the size limit"
        );
    }
}
