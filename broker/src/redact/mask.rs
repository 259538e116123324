//! What replaces a match: `****`, a fixed token, or the match with all but its last N
//! characters starred.

use super::RedactError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mask {
    /// `****`, whatever the match's length (its length is not revealed either).
    Stars,
    /// A fixed token such as `<REDACTED_ID>`.
    Token(String),
    /// Every character but the last N replaced by `*`: the length and the tail stay
    /// (`**************4578`), as support staff read card and ID numbers.
    KeepLast(usize),
}

impl Mask {
    /// The config spelling: `****` (or `stars`), `keep_last:N`, or any other text as a
    /// fixed token. A token may not hold `"` or `\`: masks land inside JSON strings, and
    /// those would break them.
    pub fn parse(rule: &str, s: &str) -> Result<Mask, RedactError> {
        let bad = |reason: &str| RedactError::Mask {
            rule: rule.into(),
            reason: reason.into(),
        };
        if s == "****" || s == "stars" {
            return Ok(Mask::Stars);
        }
        if let Some(n) = s.strip_prefix("keep_last:") {
            return n
                .trim()
                .parse::<usize>()
                .map(Mask::KeepLast)
                .map_err(|_| bad("keep_last:N needs a number of characters"));
        }
        if s.is_empty() {
            return Err(bad("the mask is empty"));
        }
        if s.contains(['"', '\\']) || s.chars().any(char::is_control) {
            return Err(bad(
                "a mask token may not contain quotes, backslashes or control characters",
            ));
        }
        Ok(Mask::Token(s.to_string()))
    }

    /// Writes the replacement of `matched` to `out`. Characters, not bytes, are kept for
    /// `KeepLast`, so a UTF-8 match is never cut inside a character.
    pub fn write(&self, matched: &[u8], out: &mut Vec<u8>) {
        match self {
            Mask::Stars => out.extend_from_slice(b"****"),
            Mask::Token(t) => out.extend_from_slice(t.as_bytes()),
            Mask::KeepLast(n) => match std::str::from_utf8(matched) {
                Ok(s) => {
                    let count = s.chars().count();
                    let hidden = count.saturating_sub(*n);
                    out.extend(std::iter::repeat_n(b'*', hidden));
                    let tail = s.char_indices().nth(hidden).map_or(s.len(), |(i, _)| i);
                    out.extend_from_slice(&s.as_bytes()[tail..]);
                }
                Err(_) => {
                    let hidden = matched.len().saturating_sub(*n);
                    out.extend(std::iter::repeat_n(b'*', hidden));
                    out.extend_from_slice(&matched[hidden..]);
                }
            },
        }
    }
}
