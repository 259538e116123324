//! PII redaction on produce (issue 21, the requirements document's PIIHook): declarative
//! rules that mask personal data in records before they reach the log.
//!
//! A topic names rule sets in `strom.redact.rules` (`cn_id,email,phone`): the built-in ones
//! (`builtin`) or named sets from the broker config's `[redact.rule_sets.NAME]` tables
//! (`config`). `strom.redact.scope` says where rules apply: the record value (the default),
//! named headers (`header:NAME`) or the strings under JSON pointers of a JSON value
//! (`json:/messages/0/content`). The result is a `Plan`, compiled when the topic's configs
//! change (`TopicSettings`), so a rule change applies to the next batch.
//!
//! Patterns run on the `regex` crate, whose matching is linear in the input: there is no
//! backtracking, so no pattern can be catastrophic. What the crate refuses (look-around,
//! back-references), patterns over the compiled-size limit and patterns that match the empty
//! string are refused at config time (INVALID_CONFIG). The batch rewrite itself is
//! `partition::redact`.

pub mod builtin;
pub mod config;
mod mask;

use std::sync::Arc;

use regex::bytes::Regex;

pub use mask::Mask;

/// The topic configs.
pub const RULES_CONFIG: &str = "strom.redact.rules";
pub const SCOPE_CONFIG: &str = "strom.redact.scope";

/// Most a user pattern may compile to: far above any sane PII pattern, small enough that a
/// config cannot make the broker build a huge automaton.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedactError {
    #[error("unknown redaction rule set {0:?} (built-in: {builtins}; others come from the broker config's [redact.rule_sets])", builtins = builtin::NAMES.join(", "))]
    UnknownRuleSet(String),
    #[error("rule {rule:?}: pattern refused: {reason}")]
    Pattern { rule: String, reason: String },
    #[error("rule {rule:?}: {reason}")]
    Mask { rule: String, reason: String },
    #[error("bad scope {0:?}: expected value, header:NAME or json:/pointer")]
    Scope(String),
    #[error("rule set {set:?}: {reason}")]
    RuleSet { set: String, reason: String },
}

/// What a match must also pass beyond its pattern (built-in rules: checksums and bounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    None,
    /// GB 11643 resident identity number: 17 digits and an ISO 7064 MOD 11-2 check character.
    CnId,
    /// Card numbers: 13–19 digits (spaces or dashes between them) passing Luhn.
    Luhn,
    /// An IPv4 or IPv6 address (`std::net` parses it), with at least one digit.
    Ip,
    /// 7 to 15 digits (E.164's range).
    Phone,
}

/// One rule: a pattern, an optional check of each match, and the mask that replaces it.
#[derive(Debug)]
pub struct Rule {
    /// The counter label (`/metrics`): `cn_id`, `email`, … or the configured name.
    pub name: String,
    regex: Regex,
    check: Check,
    /// The characters a match may not touch on either side (built-ins: a digit run is one
    /// number, so a card number inside a longer digit run is not a card number).
    isolate: fn(u8) -> bool,
    /// Built-ins: where matches can be, so most of a long value is never given to the
    /// regex (`Runs`). None: the whole text is searched.
    runs: Option<Runs>,
    pub mask: Mask,
}

fn never(_: u8) -> bool {
    false
}

/// What a built-in pattern guarantees about its matches, so that only part of a text is
/// searched: every match lies inside one maximal run of `member` bytes, holds `anchor` if
/// there is one, and a run that can hold an accepted match passes `candidate`. Searching
/// each such run alone finds exactly the matches the whole text gives, because the
/// patterns have no anchors, word boundaries or look-around (a match depends on its own
/// bytes only) and none can cross a byte outside the run; the isolation check still looks
/// at the whole text. `builtin`'s tests check each rule's `Runs` against a whole-text
/// search.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Runs {
    /// A table, not a function: it is looked up for most bytes of a value (`byte_set`).
    pub member: &'static [bool; 256],
    /// A byte every match holds: runs are found from its occurrences (memchr) instead of
    /// by looking at every byte.
    pub anchor: Option<u8>,
    /// Whether a run can hold an accepted match, from what one pass over it counted.
    pub candidate: fn(&RunStats) -> bool,
}

/// What the scan that finds a run counts on the way (so the candidate test reads no byte
/// again: per record, a JSON vector is hundreds of short runs).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RunStats {
    pub len: usize,
    pub digits: usize,
    pub plus: bool,
}

/// A `Runs::member` table: the ASCII digits, the ASCII letters if `letters`, and `extra`.
pub(crate) const fn byte_set(letters: bool, extra: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_digit() || (letters && b.is_ascii_alphabetic());
        i += 1;
    }
    let mut j = 0;
    while j < extra.len() {
        t[extra[j] as usize] = true;
        j += 1;
    }
    t
}

impl Runs {
    /// The candidate runs of `text`, as ranges, in order.
    fn of<'t>(self, text: &'t [u8]) -> impl Iterator<Item = std::ops::Range<usize>> + 't {
        let mut pos = 0;
        let member = self.member;
        // The run from `start`: where it ends and what it holds, in one pass.
        let extend = move |start: usize| {
            let mut stats = RunStats::default();
            let mut end = start;
            while let Some(&b) = text.get(end) {
                if !member[b as usize] {
                    break;
                }
                stats.digits += usize::from(b.is_ascii_digit());
                stats.plus |= b == b'+';
                end += 1;
            }
            stats.len = end - start;
            (end, stats)
        };
        std::iter::from_fn(move || loop {
            let start = match self.anchor {
                Some(a) => {
                    let at = pos + memchr::memchr(a, text.get(pos..)?)?;
                    text[pos..at]
                        .iter()
                        .rposition(|&b| !member[b as usize])
                        .map_or(pos, |i| pos + i + 1)
                }
                None => {
                    let mut i = pos;
                    while !member[*text.get(i)? as usize] {
                        i += 1;
                    }
                    i
                }
            };
            let (end, stats) = extend(start);
            pos = end.max(start + 1);
            if (self.candidate)(&stats) {
                return Some(start..end);
            }
        })
    }
}

impl Rule {
    /// A user rule: `pattern` compiled by the linear-time engine; refused if it does not
    /// compile within the size limit or matches the empty string (it would match everywhere).
    pub fn new(name: &str, pattern: &str, mask: Mask) -> Result<Rule, RedactError> {
        let regex = regex::bytes::RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| RedactError::Pattern {
                rule: name.into(),
                reason: e.to_string(),
            })?;
        if regex.is_match(b"") {
            return Err(RedactError::Pattern {
                rule: name.into(),
                reason: "it matches the empty string".into(),
            });
        }
        Ok(Rule {
            name: name.into(),
            regex,
            check: Check::None,
            isolate: never,
            runs: None,
            mask,
        })
    }

    pub(crate) fn builtin(
        name: &str,
        pattern: &str,
        check: Check,
        isolate: fn(u8) -> bool,
        runs: Option<Runs>,
        mask: Mask,
    ) -> Rule {
        Rule {
            name: name.into(),
            regex: Regex::new(pattern).expect("built-in pattern"),
            check,
            isolate,
            runs,
            mask,
        }
    }

    /// The same rule with another mask (a rule set that takes a built-in with its own mask).
    pub fn with_mask(&self, name: &str, mask: Mask) -> Rule {
        Rule {
            name: name.into(),
            regex: self.regex.clone(),
            check: self.check,
            isolate: self.isolate,
            runs: self.runs,
            mask,
        }
    }

    /// The same rule searching the whole text (what `Runs` must agree with).
    #[cfg(test)]
    fn without_runs(&self) -> Rule {
        Rule {
            runs: None,
            ..self.with_mask(&self.name, self.mask.clone())
        }
    }

    fn accepts(&self, text: &[u8], start: usize, end: usize) -> bool {
        let isolated = (start == 0 || !(self.isolate)(text[start - 1]))
            && (end == text.len() || !(self.isolate)(text[end]));
        isolated && builtin::check(self.check, &text[start..end])
    }

    /// `text` with every accepted match masked, and how many; `None` when nothing matched
    /// (the caller keeps its bytes).
    fn apply(&self, text: &[u8]) -> Option<(Vec<u8>, u64)> {
        let mut out: Option<Vec<u8>> = None;
        let mut copied = 0;
        let mut hits = 0;
        let mut take = |start: usize, end: usize| {
            if !self.accepts(text, start, end) {
                return;
            }
            let o = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
            o.extend_from_slice(&text[copied..start]);
            self.mask.write(&text[start..end], o);
            copied = end;
            hits += 1;
        };
        match self.runs {
            None => {
                for m in self.regex.find_iter(text) {
                    take(m.start(), m.end());
                }
            }
            Some(runs) => {
                for r in runs.of(text) {
                    for m in self.regex.find_iter(&text[r.clone()]) {
                        take(r.start + m.start(), r.start + m.end());
                    }
                }
            }
        }
        out.map(|mut o| {
            o.extend_from_slice(&text[copied..]);
            (o, hits)
        })
    }
}

/// A named list of rules (a built-in set has one rule).
#[derive(Debug)]
pub struct RuleSet {
    pub name: String,
    pub rules: Vec<Arc<Rule>>,
}

/// Where a topic's rules apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The whole value, as text.
    pub value: bool,
    /// Headers by name (exact, case-sensitive as Kafka's header keys).
    pub headers: Vec<String>,
    /// RFC 6901 pointers into a JSON value: every string (and number) under each.
    pub json_pointers: Vec<String>,
}

impl Scope {
    /// `strom.redact.scope`: comma-separated `value`, `header:NAME`, `json:/pointer`; empty
    /// means the value.
    pub fn parse(s: &str) -> Result<Scope, RedactError> {
        let mut scope = Scope::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "value" {
                scope.value = true;
            } else if let Some(h) = part.strip_prefix("header:").filter(|h| !h.is_empty()) {
                scope.headers.push(h.to_string());
            } else if let Some(p) = part
                .strip_prefix("json:")
                .filter(|p| p.is_empty() || p.starts_with('/'))
            {
                scope.json_pointers.push(p.to_string());
            } else {
                return Err(RedactError::Scope(part.to_string()));
            }
        }
        if scope.headers.is_empty() && scope.json_pointers.is_empty() {
            scope.value = true;
        }
        Ok(scope)
    }
}

/// A topic's compiled redaction: the rules in the order its rule sets name them, and where
/// they apply.
#[derive(Debug)]
pub struct Plan {
    pub rules: Vec<Arc<Rule>>,
    pub scope: Scope,
}

/// How many matches each rule of a plan masked (indexed like `Plan::rules`).
pub type Hits = Vec<u64>;

impl Plan {
    /// From a topic's `strom.redact.rules` and `strom.redact.scope` values; `Ok(None)` when
    /// the topic redacts nothing.
    pub fn compile(rules: Option<&str>, scope: Option<&str>) -> Result<Option<Plan>, RedactError> {
        let scope = Scope::parse(scope.unwrap_or(""))?;
        let names: Vec<&str> = rules
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        if names.is_empty() {
            return Ok(None);
        }
        let mut out = Vec::new();
        for name in names {
            let set =
                config::rule_set(name).ok_or_else(|| RedactError::UnknownRuleSet(name.into()))?;
            out.extend(set.rules.iter().cloned());
        }
        Ok(Some(Plan { rules: out, scope }))
    }

    pub fn new_hits(&self) -> Hits {
        vec![0; self.rules.len()]
    }

    /// `text` through every rule in order; `None` when nothing matched.
    pub fn redact_text(&self, text: &[u8], hits: &mut Hits) -> Option<Vec<u8>> {
        let mut current: Option<Vec<u8>> = None;
        for (i, rule) in self.rules.iter().enumerate() {
            let input = current.as_deref().unwrap_or(text);
            if let Some((out, n)) = rule.apply(input) {
                hits[i] += n;
                current = Some(out);
            }
        }
        current
    }

    /// A record value in the plan's scope: the whole value as text, then the strings under
    /// the JSON pointers. A value that is not JSON while pointers are configured is redacted
    /// as text: a producer that stops sending JSON must not leak what the rules catch.
    pub fn redact_value(&self, value: &[u8], hits: &mut Hits) -> Option<Vec<u8>> {
        let mut current: Option<Vec<u8>> = None;
        if self.scope.value {
            current = self.redact_text(value, hits);
        }
        if !self.scope.json_pointers.is_empty() {
            let input = current.as_deref().unwrap_or(value);
            match serde_json::from_slice::<serde_json::Value>(input) {
                Ok(mut doc) => {
                    let mut changed = false;
                    for p in &self.scope.json_pointers {
                        if let Some(node) = doc.pointer_mut(p) {
                            changed |= self.redact_json(node, hits);
                        }
                    }
                    if changed {
                        current = serde_json::to_vec(&doc).ok().or(current);
                    }
                }
                Err(_) if !self.scope.value => {
                    if let Some(out) = self.redact_text(input, hits) {
                        current = Some(out);
                    }
                }
                Err(_) => {}
            }
        }
        current
    }

    /// Every string and number under `node`; numbers that matched become strings.
    fn redact_json(&self, node: &mut serde_json::Value, hits: &mut Hits) -> bool {
        use serde_json::Value;
        match node {
            Value::String(s) => match self.redact_text(s.as_bytes(), hits) {
                Some(out) => {
                    *s = String::from_utf8_lossy(&out).into_owned();
                    true
                }
                None => false,
            },
            Value::Number(n) => match self.redact_text(n.to_string().as_bytes(), hits) {
                Some(out) => {
                    *node = Value::String(String::from_utf8_lossy(&out).into_owned());
                    true
                }
                None => false,
            },
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |c, v| self.redact_json(v, hits) | c),
            Value::Object(map) => map
                .values_mut()
                .fold(false, |c, v| self.redact_json(v, hits) | c),
            _ => false,
        }
    }

    /// Whether a header of this name is in scope.
    pub fn covers_header(&self, key: &[u8]) -> bool {
        self.scope.headers.iter().any(|h| h.as_bytes() == key)
    }
}

#[cfg(test)]
mod tests;
