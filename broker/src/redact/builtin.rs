//! The built-in rule sets, usable with no broker config: `cn_id`, `phone`, `email`, `card`,
//! `ip`. Each is a candidate pattern plus a check, so a checksum decides (an 18-digit order
//! number is not a resident ID unless its check character is right; a 16-digit id is not a
//! card unless it passes Luhn), and a number inside a longer run of digits is not taken.

use std::sync::{Arc, LazyLock};

use super::{byte_set, Check, Mask, Rule, RuleSet, Runs};

pub const NAMES: &[&str] = &["cn_id", "phone", "email", "card", "ip"];

fn digit(b: u8) -> bool {
    b.is_ascii_digit()
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn not_isolated(_: u8) -> bool {
    false
}

/// The bytes of `phone`'s pattern; each of its alternatives has ≥ 10 digits or a `+`.
static PHONE_BYTES: [bool; 256] = byte_set(false, b" .()+-");
static PHONE: Runs = Runs {
    member: &PHONE_BYTES,
    anchor: None,
    candidate: |run| run.plus || run.digits >= 10,
};

/// The bytes of `email`'s pattern (local part, `@`, domain); each match holds one `@`.
static EMAIL_BYTES: [bool; 256] = byte_set(true, b"._%+-@");
static EMAIL: Runs = Runs {
    member: &EMAIL_BYTES,
    anchor: Some(b'@'),
    candidate: |_| true,
};

/// `cn_id`: 18 characters of digits and X.
static CN_ID_BYTES: [bool; 256] = byte_set(false, b"Xx");
static CN_ID: Runs = Runs {
    member: &CN_ID_BYTES,
    anchor: None,
    candidate: |run| run.len >= 18,
};

/// `card`: 13 or more digits, spaces or dashes between them.
static CARD_BYTES: [bool; 256] = byte_set(false, b" -");
static CARD: Runs = Runs {
    member: &CARD_BYTES,
    anchor: None,
    candidate: |run| run.digits >= 13,
};

const IPV4: &str = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])){3}";

static SETS: LazyLock<Vec<Arc<RuleSet>>> = LazyLock::new(|| {
    let set = |rule: Rule| {
        Arc::new(RuleSet {
            name: rule.name.clone(),
            rules: vec![Arc::new(rule)],
        })
    };
    vec![
        // GB 11643: 6-digit region, 8-digit birth date, 3-digit sequence, check character.
        set(Rule::builtin(
            "cn_id",
            r"[0-9]{17}[0-9Xx]",
            Check::CnId,
            digit,
            Some(CN_ID),
            Mask::Token("<REDACTED_ID>".into()),
        )),
        // Mainland mobiles (+86 optional), E.164 numbers written with their `+`, and North
        // American numbers with separators. A bare digit run of another length is left alone:
        // it is more often an amount, a date or an id than a phone number.
        set(Rule::builtin(
            "phone",
            r"(?:\+?86[ -]?)?1[3-9][0-9](?:[ -]?[0-9]{4}){2}|\+[1-9][0-9 .()-]{5,18}[0-9]|\(?[2-9][0-9]{2}\)?[ .-][0-9]{3}[ .-][0-9]{4}",
            Check::Phone,
            digit,
            Some(PHONE),
            Mask::KeepLast(4),
        )),
        set(Rule::builtin(
            "email",
            r"[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}",
            Check::None,
            not_isolated,
            Some(EMAIL),
            Mask::Token("<REDACTED_EMAIL>".into()),
        )),
        set(Rule::builtin(
            "card",
            r"[0-9](?:[ -]?[0-9]){12,18}",
            Check::Luhn,
            digit,
            Some(CARD),
            Mask::KeepLast(4),
        )),
        set(Rule::builtin(
            "ip",
            &format!(
                r"{IPV4}|[0-9A-Fa-f]{{0,4}}(?::[0-9A-Fa-f]{{0,4}}){{2,7}}(?:\.[0-9]{{1,3}}){{0,3}}(?:%[0-9A-Za-z]+)?"
            ),
            Check::Ip,
            alnum,
            None,
            Mask::Token("<REDACTED_IP>".into()),
        )),
    ]
});

/// The built-in set of that name.
pub fn set(name: &str) -> Option<Arc<RuleSet>> {
    SETS.iter().find(|s| s.name == name).cloned()
}

/// Whether a match passes its rule's check.
pub fn check(check: Check, m: &[u8]) -> bool {
    match check {
        Check::None => true,
        Check::CnId => cn_id_valid(m),
        Check::Luhn => {
            let digits: Vec<u8> = m
                .iter()
                .filter(|b| b.is_ascii_digit())
                .map(|b| b - b'0')
                .collect();
            (13..=19).contains(&digits.len()) && luhn_valid(&digits)
        }
        Check::Phone => (7..=15).contains(&m.iter().filter(|b| b.is_ascii_digit()).count()),
        Check::Ip => {
            let Ok(s) = std::str::from_utf8(m) else {
                return false;
            };
            let addr = s.split('%').next().unwrap_or(s);
            addr.bytes().any(|b| b.is_ascii_hexdigit()) && addr.parse::<std::net::IpAddr>().is_ok()
        }
    }
}

/// GB 11643-1999: weights 2^(17-i) mod 11, check character "10X98765432"[sum mod 11].
pub fn cn_id_valid(id: &[u8]) -> bool {
    const WEIGHTS: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
    const CHECK: &[u8; 11] = b"10X98765432";
    if id.len() != 18 || !id[..17].iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = id[..17]
        .iter()
        .zip(WEIGHTS)
        .map(|(d, w)| (d - b'0') as u32 * w)
        .sum();
    CHECK[(sum % 11) as usize] == id[17].to_ascii_uppercase()
}

/// Luhn (ISO/IEC 7812): from the right, every second digit doubled.
pub fn luhn_valid(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = d as u32;
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 {
                    x - 9
                } else {
                    x
                }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}
