//! Topic subscription patterns of the KIP-848 protocol (`subscribed_topic_regex`). Kafka
//! evaluates them with RE2J, matching the whole topic name; this is the RE2 subset patterns
//! in practice use: literals and escapes (`\.`, `\d`, `\w`, `\s`), `.`, classes (`[a-z_]`,
//! `[^.]`), groups, alternation, the quantifiers `* + ? {n} {n,} {n,m}` (lazy forms are
//! accepted: with a whole-name match they mean the same), and `^`/`$`.
//!
//! A backtracking matcher with a step budget: topic names are at most 249 characters, and
//! a pathological pattern stops matching instead of stalling the shard.

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid regular expression at {pos}: {message}")]
pub struct RegexError {
    pub pos: usize,
    pub message: String,
}

#[derive(Debug, Clone)]
enum Node {
    Char(char),
    Any,
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
    Start,
    End,
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
}

#[derive(Debug, Clone)]
pub struct TopicRegex {
    root: Node,
}

const STEP_BUDGET: usize = 200_000;

impl TopicRegex {
    pub fn parse(pattern: &str) -> Result<TopicRegex, RegexError> {
        let mut p = Parser {
            chars: pattern.chars().collect(),
            pos: 0,
        };
        let root = p.alternation()?;
        if p.pos < p.chars.len() {
            return Err(p.err("unmatched )"));
        }
        Ok(TopicRegex { root })
    }

    /// Whether the whole of `s` matches (Java's `Matcher.matches`).
    pub fn matches(&self, s: &str) -> bool {
        let chars: Vec<char> = s.chars().collect();
        let mut steps = 0usize;
        m(&self.root, &chars, 0, &mut steps, &mut |end, _| {
            end == chars.len()
        })
    }
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn err(&self, message: &str) -> RegexError {
        RegexError {
            pos: self.pos,
            message: message.to_string(),
        }
    }
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }
    fn alternation(&mut self) -> Result<Node, RegexError> {
        let mut alts = vec![self.concat()?];
        while self.peek() == Some('|') {
            self.pos += 1;
            alts.push(self.concat()?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().expect("one")
        } else {
            Node::Alt(alts)
        })
    }
    fn concat(&mut self) -> Result<Node, RegexError> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            items.push(self.quantified(atom)?);
        }
        Ok(Node::Concat(items))
    }
    fn quantified(&mut self, atom: Node) -> Result<Node, RegexError> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => return self.braces(atom),
            _ => return Ok(atom),
        };
        self.pos += 1;
        if self.peek() == Some('?') {
            self.pos += 1;
        }
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
        })
    }
    fn number(&mut self) -> Option<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        self.chars[start..self.pos]
            .iter()
            .collect::<String>()
            .parse()
            .ok()
    }
    fn braces(&mut self, atom: Node) -> Result<Node, RegexError> {
        self.pos += 1;
        let min = self.number().ok_or_else(|| self.err("expected a count"))?;
        let max = if self.peek() == Some(',') {
            self.pos += 1;
            self.number()
        } else {
            Some(min)
        };
        if self.peek() != Some('}') || max.is_some_and(|m| m < min) || min > 1000 {
            return Err(self.err("bad {n,m} repetition"));
        }
        self.pos += 1;
        if self.peek() == Some('?') {
            self.pos += 1;
        }
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
        })
    }
    fn atom(&mut self) -> Result<Node, RegexError> {
        let c = self.peek().ok_or_else(|| self.err("unexpected end"))?;
        self.pos += 1;
        match c {
            '.' => Ok(Node::Any),
            '^' => Ok(Node::Start),
            '$' => Ok(Node::End),
            '(' => {
                // Non-capturing groups behave the same here.
                if self.chars[self.pos..].starts_with(&['?', ':']) {
                    self.pos += 2;
                }
                let inner = self.alternation()?;
                if self.peek() != Some(')') {
                    return Err(self.err("missing )"));
                }
                self.pos += 1;
                Ok(inner)
            }
            '[' => self.class(),
            '\\' => self.escape(false).map(|r| match r {
                Escaped::Char(c) => Node::Char(c),
                Escaped::Class(ranges, negated) => Node::Class { ranges, negated },
            }),
            '*' | '+' | '?' | '{' => Err(RegexError {
                pos: self.pos - 1,
                message: "nothing to repeat".into(),
            }),
            c => Ok(Node::Char(c)),
        }
    }
    fn escape(&mut self, in_class: bool) -> Result<Escaped, RegexError> {
        let c = self.peek().ok_or_else(|| self.err("trailing \\"))?;
        self.pos += 1;
        let digits = vec![('0', '9')];
        let word = vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')];
        let space = vec![(' ', ' '), ('\t', '\r')];
        Ok(match c {
            'd' => Escaped::Class(digits, false),
            'D' if !in_class => Escaped::Class(digits, true),
            'w' => Escaped::Class(word, false),
            'W' if !in_class => Escaped::Class(word, true),
            's' => Escaped::Class(space, false),
            'S' if !in_class => Escaped::Class(space, true),
            't' => Escaped::Char('\t'),
            'n' => Escaped::Char('\n'),
            c if c.is_ascii_alphanumeric() => return Err(self.err("unsupported escape")),
            c => Escaped::Char(c),
        })
    }
    fn class(&mut self) -> Result<Node, RegexError> {
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let c = self.peek().ok_or_else(|| self.err("missing ]"))?;
            self.pos += 1;
            if c == ']' && !first {
                break;
            }
            first = false;
            let lo = match c {
                '\\' => match self.escape(true)? {
                    Escaped::Char(c) => c,
                    Escaped::Class(rs, _) => {
                        ranges.extend(rs);
                        continue;
                    }
                },
                c => c,
            };
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&n| n != ']') {
                self.pos += 1;
                let hi = self.peek().ok_or_else(|| self.err("missing ]"))?;
                self.pos += 1;
                if hi < lo {
                    return Err(self.err("bad range"));
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Ok(Node::Class { ranges, negated })
    }
}

enum Escaped {
    Char(char),
    Class(Vec<(char, char)>, bool),
}

/// Matches `node` at `pos`, calling `k` with each possible end until it accepts.
fn m(
    node: &Node,
    s: &[char],
    pos: usize,
    steps: &mut usize,
    k: &mut dyn FnMut(usize, &mut usize) -> bool,
) -> bool {
    *steps += 1;
    if *steps > STEP_BUDGET {
        return false;
    }
    match node {
        Node::Char(c) => s.get(pos) == Some(c) && k(pos + 1, steps),
        Node::Any => pos < s.len() && k(pos + 1, steps),
        Node::Class { ranges, negated } => match s.get(pos) {
            Some(&c) => {
                let inside = ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
                inside != *negated && k(pos + 1, steps)
            }
            None => false,
        },
        Node::Start => pos == 0 && k(pos, steps),
        Node::End => pos == s.len() && k(pos, steps),
        Node::Alt(alts) => alts.iter().any(|a| m(a, s, pos, steps, k)),
        Node::Concat(items) => concat(items, s, pos, steps, k),
        Node::Repeat { node, min, max } => repeat(node, *min, *max, 0, s, pos, steps, k),
    }
}

fn concat(
    items: &[Node],
    s: &[char],
    pos: usize,
    steps: &mut usize,
    k: &mut dyn FnMut(usize, &mut usize) -> bool,
) -> bool {
    match items.split_first() {
        None => k(pos, steps),
        Some((first, rest)) => m(first, s, pos, steps, &mut |p, st| concat(rest, s, p, st, k)),
    }
}

#[allow(clippy::too_many_arguments)]
fn repeat(
    node: &Node,
    min: u32,
    max: Option<u32>,
    done: u32,
    s: &[char],
    pos: usize,
    steps: &mut usize,
    k: &mut dyn FnMut(usize, &mut usize) -> bool,
) -> bool {
    // Greedy: one more first, then stop (only once the minimum is met).
    if max.is_none_or(|mx| done < mx)
        && m(node, s, pos, steps, &mut |p, st| {
            // An empty iteration cannot make progress: stop repeating it.
            p != pos && repeat(node, min, max, done + 1, s, p, st, k)
        })
    {
        return true;
    }
    done >= min && k(pos, steps)
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
    fn given_bad_or_pathological_patterns_then_error_or_bounded_no_match() {
        for bad in ["(", "a)", "[a-", "*a", "x{3,1}", "\\q"] {
            assert!(TopicRegex::parse(bad).is_err(), "{bad}");
        }
        let evil = TopicRegex::parse("(a*)*(a*)*(a*)*b").unwrap();
        assert!(!evil.matches(&"a".repeat(200)));
    }
}
