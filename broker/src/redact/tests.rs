use proptest::prelude::*;

use super::*;

fn plan(rules: &str, scope: Option<&str>) -> Plan {
    Plan::compile(Some(rules), scope).unwrap().unwrap()
}

fn redact(p: &Plan, text: &str) -> String {
    let mut hits = p.new_hits();
    match p.redact_value(text.as_bytes(), &mut hits) {
        Some(out) => String::from_utf8(out).unwrap(),
        None => text.to_string(),
    }
}

/// A valid GB 11643 number from its first 17 digits.
fn cn_id(first17: &str) -> String {
    for c in "0123456789X".chars() {
        let id = format!("{first17}{c}");
        if builtin::cn_id_valid(id.as_bytes()) {
            return id;
        }
    }
    unreachable!("one check character fits")
}

/// A Luhn-valid number from its first digits.
fn luhn(prefix: &str) -> String {
    (0..10)
        .map(|d| format!("{prefix}{d}"))
        .find(|n| builtin::luhn_valid(&n.bytes().map(|b| b - b'0').collect::<Vec<_>>()))
        .unwrap()
}

#[test]
fn given_a_resident_id_when_redacted_then_only_a_valid_checksum_is_masked() {
    let p = plan("cn_id", None);
    // The national standard's own example.
    assert!(builtin::cn_id_valid(b"11010519491231002X"));
    assert_eq!(
        redact(&p, "身份证号11010519491231002X，请核对"),
        "身份证号<REDACTED_ID>，请核对"
    );
    // Wrong check character, and an 18-digit run inside a longer number: left alone.
    assert_eq!(redact(&p, "id 110105194912310021"), "id 110105194912310021");
    assert_eq!(redact(&p, "n=911010519491231002X"), "n=911010519491231002X");
}

#[test]
fn given_each_builtin_when_redacted_then_masked_with_its_default() {
    let p = plan("cn_id,email,phone,card,ip", None);
    let card = luhn("411111111111111");
    let text = format!(
        "mail bob.smith+x@example.co.uk call +1 415 555 0100 or 13812345678, card {card}, from 10.1.2.3 and 2001:db8::1"
    );
    let out = redact(&p, &text);
    assert_eq!(
        out,
        "mail <REDACTED_EMAIL> call ***********0100 or *******5678, card ************1111, from <REDACTED_IP> and <REDACTED_IP>"
    );
}

#[test]
fn given_near_misses_when_redacted_then_untouched() {
    let p = plan("cn_id,email,phone,card,ip", None);
    for text in [
        "order 4111111111111112 failed Luhn",
        "on 2024-01-15 at 12:30:45",
        "use std::net::IpAddr and version 1.2.3",
        "version v10.1.2.3 and 999.1.1.1",
        "amount 1234567",
        "a@b",
    ] {
        assert_eq!(redact(&p, text), text, "{text}");
    }
}

#[test]
fn given_json_pointer_scope_when_redacted_then_only_under_the_pointer() {
    let p = plan("email,card", Some("json:/messages"));
    let card = luhn("555555555555444");
    let v = format!(
        r#"{{"user":"a@example.com","messages":[{{"role":"user","content":"I am b@example.com"}},{{"n":{card}}}]}}"#
    );
    let out: serde_json::Value = serde_json::from_str(&redact(&p, &v)).unwrap();
    assert_eq!(out["user"], "a@example.com");
    assert_eq!(out["messages"][0]["content"], "I am <REDACTED_EMAIL>");
    assert_eq!(out["messages"][1]["n"], "************4444");
    // Not JSON: redacted as text (fail closed).
    assert_eq!(redact(&p, "plain a@example.com"), "plain <REDACTED_EMAIL>");
}

#[test]
fn given_header_scope_when_checking_then_value_is_out_of_scope() {
    let p = plan("email", Some("header:x-prompt"));
    assert!(!p.scope.value);
    assert!(p.covers_header(b"x-prompt"));
    assert!(!p.covers_header(b"x-other"));
    let p = plan("email", Some("value,header:x-prompt"));
    assert!(p.scope.value);
}

#[test]
fn given_bad_configs_when_compiling_then_refused_with_the_reason() {
    assert_eq!(
        Plan::compile(Some("cn_id,nope"), None).unwrap_err(),
        RedactError::UnknownRuleSet("nope".into())
    );
    assert!(matches!(
        Scope::parse("body").unwrap_err(),
        RedactError::Scope(_)
    ));
    assert!(Scope::parse("json:messages").is_err());
    assert!(Plan::compile(Some(""), None).unwrap().is_none());
    // What a backtracking engine would need (look-around, back-references) does not compile.
    for pattern in [r"(a+)+\1", r"(?=a)b", r"(?<!x)y"] {
        assert!(matches!(
            Rule::new("r", pattern, Mask::Stars),
            Err(RedactError::Pattern { .. })
        ));
    }
    // Matches everywhere: refused.
    assert!(Rule::new("r", "a*", Mask::Stars).is_err());
    // Too big to compile.
    assert!(Rule::new("r", r"(?:\w{1000}){1000}", Mask::Stars).is_err());
    assert!(Mask::parse("r", r#"<"x">"#).is_err());
    assert!(Mask::parse("r", "keep_last:x").is_err());
}

#[test]
fn given_a_catastrophic_pattern_for_backtrackers_when_run_then_linear() {
    // (a|a)*b on "aaaa…" is exponential for a backtracking engine; here it is one pass.
    let rule = Rule::new("r", "(a|aa)*b", Mask::Stars).unwrap();
    let text = "a".repeat(100_000);
    assert!(rule.apply(text.as_bytes()).is_none());
}

#[test]
fn given_named_rule_sets_when_installed_then_topics_can_name_them() {
    let config: config::RedactConfig = toml::from_str(
        r#"
        [rule_sets.tests_orders]
        rules = [
          { name = "order_id", pattern = "ORD-[0-9]{8}", mask = "keep_last:4" },
          { builtin = "cn_id", mask = "<ID>" },
        ]
        "#,
    )
    .unwrap();
    config::install(&config).unwrap();
    let p = plan("tests_orders", None);
    let id = cn_id("11010519491231002");
    assert_eq!(
        redact(&p, &format!("ORD-12345678 for {id}")),
        "********5678 for <ID>"
    );
    let names: Vec<&str> = p.rules.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["order_id", "cn_id"]);
    let shadow: config::RedactConfig =
        toml::from_str("[rule_sets.email]\nrules = [{ pattern = \"x\" }]").unwrap();
    assert!(config::install(&shadow).is_err());
    let bad: config::RedactConfig =
        toml::from_str("[rule_sets.tests_bad]\nrules = [{ pattern = \"(\" }]").unwrap();
    assert!(config::install(&bad).is_err());
    assert!(config::rule_set("tests_bad").is_none());
}

#[test]
fn given_keep_last_on_multibyte_text_when_masked_then_characters_kept_whole() {
    let mut out = Vec::new();
    Mask::KeepLast(2).write("张三丰先生".as_bytes(), &mut out);
    assert_eq!(String::from_utf8(out).unwrap(), "***先生");
}

/// Texts dense in what the built-in patterns look for: digits and their separators, `+`,
/// `@`, letters, and real PII pieces among them.
fn pii_like() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[0-9 .()+@a-zA-Z_%,:xX-]{0,12}",
        "[0-9]{1,19}",
        Just("+1 415 555 0100".to_string()),
        Just("13812345678".to_string()),
        Just("+86 138 1234 5678".to_string()),
        Just("(415) 555-0100".to_string()),
        Just("bob.smith+x@example.co.uk".to_string()),
        Just("a@b.c@d.ef".to_string()),
        Just("11010519491231002X".to_string()),
        Just("4111 1111 1111 1111".to_string()),
        Just(", 0.123456".to_string()),
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|ps| ps.concat())
}

#[test]
fn given_a_json_vector_value_when_redacted_then_numbers_left_and_pii_masked() {
    let p = plan("email,phone", None);
    let numbers: Vec<String> = (0..384)
        .map(|i| format!("0.{:06}", i * 2599 % 1_000_000))
        .collect();
    let text = format!(
        r#"{{"text": "call +1 415 555 0199 or mail user7@example.com", "embedding": [{}]}}"#,
        numbers.join(", ")
    );
    let want = text
        .replace("+1 415 555 0199", "***********0199")
        .replace("user7@example.com", "<REDACTED_EMAIL>");
    assert_eq!(redact(&p, &text), want);
}

proptest! {
    /// Each built-in rule finds, searching only its candidate runs, exactly what a search
    /// of the whole text finds.
    #[test]
    fn prop_runs_agree_with_a_whole_text_search(text in pii_like()) {
        for name in builtin::NAMES {
            for rule in &builtin::set(name).unwrap().rules {
                let whole = rule.without_runs();
                prop_assert_eq!(rule.apply(text.as_bytes()), whole.apply(text.as_bytes()), "{} on {:?}", name, text);
            }
        }
    }


    /// Any valid ID, anywhere in text without other digits, is masked; the rest of the text
    /// is kept byte for byte.
    #[test]
    fn prop_valid_ids_are_always_masked(first in "[1-9][0-9]{16}", before in "[a-zA-Z ,.:]{0,20}", after in "[a-zA-Z ,.:]{0,20}") {
        let id = cn_id(&first);
        let p = plan("cn_id", None);
        let out = redact(&p, &format!("{before}{id}{after}"));
        prop_assert_eq!(out, format!("{before}<REDACTED_ID>{after}"));
    }

    /// Every Luhn-valid 16-digit number is masked to its last four; a one-digit change of it
    /// is not a card.
    #[test]
    fn prop_cards_by_luhn(prefix in "[3-6][0-9]{14}") {
        let card = luhn(&prefix);
        let p = plan("card", None);
        let out = redact(&p, &format!("card {card}."));
        prop_assert_eq!(out, format!("card ************{}.", &card[12..]));
        let last = card.as_bytes()[15] - b'0';
        let wrong = format!("{}{}", &card[..15], (last + 1) % 10);
        prop_assert_eq!(redact(&p, &wrong), wrong.clone());
    }

    /// Redaction never panics, is idempotent (masked text has nothing left to mask) and
    /// leaves text without digits or `@` as it was.
    #[test]
    fn prop_redaction_is_idempotent(text in "\\PC{0,200}") {
        let p = plan("cn_id,phone,email,card,ip", None);
        let once = redact(&p, &text);
        prop_assert_eq!(redact(&p, &once), once.clone());
        if !text.bytes().any(|b| b.is_ascii_hexdigit() || b == b'@' || b == b':') {
            prop_assert_eq!(once, text);
        }
    }

    /// Bytes that are not UTF-8 go through without panics.
    #[test]
    fn prop_binary_values_never_panic(value in proptest::collection::vec(any::<u8>(), 0..300)) {
        let p = plan("cn_id,phone,email,card,ip", Some("value,json:/a"));
        let mut hits = p.new_hits();
        let _ = p.redact_value(&value, &mut hits);
    }

    /// Any IPv4 address is masked.
    #[test]
    fn prop_ipv4_masked(a in any::<[u8; 4]>()) {
        let ip = std::net::Ipv4Addr::from(a).to_string();
        let p = plan("ip", None);
        prop_assert_eq!(redact(&p, &format!("from {ip} now")), "from <REDACTED_IP> now");
    }
}
