//! The principal of a TLS client certificate, as Kafka's `DefaultKafkaPrincipalBuilder`
//! makes it: the subject's distinguished name in the form Java's
//! `X500Principal.getName()` gives (RFC 2253), passed through `ssl.principal.mapping.rules`.
//!
//! Java's RFC 2253 form, which ACLs written for Kafka match byte for byte: RDNs from the
//! last to the first of the certificate's sequence, joined by `,`; multi-valued RDNs joined by
//! `+`; the RFC 2253 keywords (CN, C, L, ST, O, OU, STREET, DC, UID), any other attribute as
//! its dotted OID with the value as `#` and the hex of its DER encoding (so `emailAddress`
//! becomes `1.2.840.113549.1.9.1=#16...`); the characters `,=+<>#;"\` and leading or
//! trailing spaces escaped with a backslash.
//!
//! The rules are Kafka's: a comma-separated list of `DEFAULT` and
//! `RULE:pattern/replacement/[LU]`, tried in order; the first whose pattern matches the whole
//! name gives the principal (the replacement applied to every match, then lower- or
//! upper-cased). No matching rule refuses the connection. Patterns are Rust `regex` syntax,
//! which agrees with Java's for what mapping rules use (no look-around or back-references).

use regex::Regex;
use x509_parser::der_parser::asn1_rs::{Any, Class, Tag};
use x509_parser::prelude::{FromDer, X509Certificate};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SslPrincipalError {
    #[error("client certificate is not valid DER X.509: {0}")]
    Certificate(String),
    #[error("invalid ssl.principal.mapping.rules rule `{rule}`: {reason}")]
    Rule { rule: String, reason: String },
    #[error("no ssl.principal.mapping.rules rule applies to `{0}`")]
    NoMatchingRule(String),
}

const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The subject of a DER certificate in Java's RFC 2253 form.
pub fn subject_rfc2253(der: &[u8]) -> Result<String, SslPrincipalError> {
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|e| SslPrincipalError::Certificate(e.to_string()))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|atv| {
                    let oid = atv.attr_type().to_id_string();
                    match KEYWORDS.iter().find(|(o, _)| *o == oid) {
                        Some((_, kw)) => match directory_string(atv.attr_value()) {
                            Some(s) => format!("{kw}={}", escape(&s)),
                            None => format!("{kw}={}", hex_der(atv.attr_value())),
                        },
                        None => format!("{oid}={}", hex_der(atv.attr_value())),
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// The text of a string value Java prints as text (its `isDerString`), else `None`.
fn directory_string(v: &Any<'_>) -> Option<String> {
    match v.tag() {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::GeneralString => {
            std::str::from_utf8(v.data).ok().map(str::to_string)
        }
        // T61: Java decodes it as ISO-8859-1.
        Tag::T61String => Some(v.data.iter().map(|&b| b as char).collect()),
        Tag::BmpString => {
            if !v.data.len().is_multiple_of(2) {
                return None;
            }
            let units: Vec<u16> = v
                .data
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

fn escape(s: &str) -> String {
    const ESCAPEES: &str = ",=+<>#;\"\\";
    let chars: Vec<char> = s.chars().collect();
    let lead = chars
        .iter()
        .take_while(|c| **c == ' ' || **c == '\r')
        .count();
    let trail = chars.len()
        - chars[lead..]
            .iter()
            .rev()
            .take_while(|c| **c == ' ' || **c == '\r')
            .count();
    let mut out = String::with_capacity(s.len() + 4);
    for (i, c) in chars.iter().enumerate() {
        if *c == '\0' {
            out.push_str("\\00");
            continue;
        }
        if ESCAPEES.contains(*c) || i < lead || i >= trail {
            out.push('\\');
        }
        out.push(*c);
    }
    out
}

/// `#` and the lower-case hex of the value's whole DER encoding (identifier, length, content).
fn hex_der(v: &Any<'_>) -> String {
    let mut der = Vec::with_capacity(v.data.len() + 4);
    let class = match v.class() {
        Class::Universal => 0u8,
        Class::Application => 0x40,
        Class::ContextSpecific => 0x80,
        Class::Private => 0xc0,
    };
    let constructed = if v.header.is_constructed() { 0x20 } else { 0 };
    let tag = v.tag().0;
    if tag < 31 {
        der.push(class | constructed | tag as u8);
    } else {
        der.push(class | constructed | 0x1f);
        let mut groups = Vec::new();
        let mut t = tag;
        loop {
            groups.push((t & 0x7f) as u8);
            t >>= 7;
            if t == 0 {
                break;
            }
        }
        for (i, g) in groups.iter().enumerate().rev() {
            der.push(if i > 0 { g | 0x80 } else { *g });
        }
    }
    let len = v.data.len();
    if len < 0x80 {
        der.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        der.push(0x80 | bytes.len() as u8);
        der.extend(bytes);
    }
    der.extend_from_slice(v.data);
    let mut out = String::with_capacity(1 + der.len() * 2);
    out.push('#');
    for b in der {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Map {
        /// `^(?:pattern)$`: Java's `matches()` (the whole name).
        whole: Regex,
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

/// Kafka's `SslPrincipalMapper`.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

/// The body of a `RULE:` up to its next unescaped `/` (backslash escapes kept as written).
fn take_part(s: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '/' => return Some((&s[..i], &s[i + 1..])),
            _ => {}
        }
    }
    None
}

impl PrincipalMapper {
    pub fn parse(rules: &str) -> Result<PrincipalMapper, SslPrincipalError> {
        let mut out = Vec::new();
        let mut rest = rules.trim();
        while !rest.is_empty() {
            let bad = |reason: &str| SslPrincipalError::Rule {
                rule: rest.to_string(),
                reason: reason.into(),
            };
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                out.push(Rule::Default);
                rest = after;
            } else if let Some(body) = rest.strip_prefix("RULE:") {
                let (pattern, after) =
                    take_part(body).ok_or_else(|| bad("no `/` after the pattern"))?;
                let (replacement, after) =
                    take_part(after).ok_or_else(|| bad("no `/` after the replacement"))?;
                let (case, after) = match after.chars().next() {
                    Some(c @ ('L' | 'U')) => (Some(c), &after[1..]),
                    _ => (None, after),
                };
                let whole =
                    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| bad(&e.to_string()))?;
                let pattern = Regex::new(pattern).map_err(|e| bad(&e.to_string()))?;
                let groups = pattern.captures_len() - 1;
                out.push(Rule::Map {
                    whole,
                    pattern,
                    replacement: java_replacement(replacement, groups),
                    case,
                });
                rest = after;
            } else {
                return Err(bad("expected DEFAULT or RULE:pattern/replacement/[LU]"));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(r) => rest = r.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(bad("unexpected text after the rule")),
            }
        }
        Ok(PrincipalMapper { rules: out })
    }

    /// The principal name for `dn`, from the first rule that applies.
    pub fn name(&self, dn: &str) -> Result<String, SslPrincipalError> {
        for r in &self.rules {
            match r {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Map {
                    whole,
                    pattern,
                    replacement,
                    case,
                } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let out = pattern.replace_all(dn, replacement.as_str()).into_owned();
                    return Ok(match case {
                        Some('L') => out.to_lowercase(),
                        Some('U') => out.to_uppercase(),
                        _ => out,
                    });
                }
            }
        }
        Err(SslPrincipalError::NoMatchingRule(dn.to_string()))
    }
}

/// Java's `Matcher.replaceAll` replacement (`$n` groups, `\x` a literal x; Kafka treats
/// `$n` past the group count by dropping digits, then as a literal) in `regex`'s syntax.
fn java_replacement(java: &str, groups: usize) -> String {
    let mut out = String::new();
    let chars: Vec<char> = java.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                push_literal(&mut out, chars[i + 1]);
                i += 2;
            }
            '$' if i + 1 < chars.len() && chars[i + 1].is_ascii_digit() => {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && chars[end].is_ascii_digit() {
                    end += 1;
                }
                // Java takes digits while the group number stays valid.
                let mut n: usize = chars[start].to_digit(10).unwrap_or(0) as usize;
                let mut used = start + 1;
                while used < end {
                    let next = n * 10 + chars[used].to_digit(10).unwrap_or(0) as usize;
                    if next > groups {
                        break;
                    }
                    n = next;
                    used += 1;
                }
                if n > groups {
                    push_literal(&mut out, '$');
                    i += 1;
                    continue;
                }
                out.push_str(&format!("${{{n}}}"));
                i = used;
            }
            c => {
                push_literal(&mut out, c);
                i += 1;
            }
        }
    }
    out
}

fn push_literal(out: &mut String, c: char) {
    if c == '$' {
        out.push_str("$$");
    } else {
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_with(dn: rcgen::DistinguishedName) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = dn;
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn given_certificate_when_formatting_subject_then_java_rfc2253_order_and_escapes() {
        use rcgen::{DnType, DnValue};
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(DnType::CountryName, "US");
        dn.push(DnType::OrganizationName, "Acme, Inc.");
        dn.push(DnType::OrganizationalUnitName, " ops+dev ");
        dn.push(DnType::CommonName, "alice");
        dn.push(
            DnType::CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1]),
            DnValue::Ia5String("a@b".try_into().unwrap()),
        );
        let s = subject_rfc2253(&cert_with(dn)).unwrap();
        assert_eq!(
            s,
            "1.2.840.113549.1.9.1=#1603614062,CN=alice,OU=\\ ops\\+dev\\ ,O=Acme\\, Inc.,C=US"
        );
    }

    #[test]
    fn given_garbage_when_formatting_subject_then_error_not_panic() {
        assert!(subject_rfc2253(b"\x30\x03\x02\x01").is_err());
        assert!(subject_rfc2253(&[]).is_err());
    }

    #[test]
    fn given_kafka_rules_when_mapping_then_first_match_wins_with_case() {
        let m = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=([a-z]+),O=(.*)$/$1@$2/,DEFAULT",
        )
        .unwrap();
        assert_eq!(m.name("CN=Kafka,OU=ServiceUsers,O=x").unwrap(), "kafka");
        assert_eq!(m.name("CN=bob,O=acme").unwrap(), "bob@acme");
        assert_eq!(m.name("CN=Bob,O=acme").unwrap(), "CN=Bob,O=acme");
        let strict = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/U").unwrap();
        assert_eq!(strict.name("CN=x").unwrap(), "X");
        assert_eq!(
            strict.name("O=x").unwrap_err(),
            SslPrincipalError::NoMatchingRule("O=x".into())
        );
        // `$2` with one group is literal text, as in Kafka; an escaped slash is a slash.
        let lit = PrincipalMapper::parse(r"RULE:^CN=(.*)$/$1\/$2/").unwrap();
        assert_eq!(lit.name("CN=a").unwrap(), "a/$2");
    }

    #[test]
    fn given_bad_rules_when_parsing_then_refused_with_the_rule() {
        for bad in ["RULE:^CN=(.*$/$1/", "RULE:abc", "DEFAULTS", "nonsense"] {
            assert!(
                matches!(
                    PrincipalMapper::parse(bad),
                    Err(SslPrincipalError::Rule { .. })
                ),
                "{bad}"
            );
        }
        assert!(PrincipalMapper::parse("DEFAULT").is_ok());
    }
}
