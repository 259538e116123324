//! Object keys: the per-topic prefix template (`strom.remote.prefix`) and the names of one
//! remote segment's objects. Tenant isolation is a property of the template's *shape*: every
//! template begins with the path segment `tenant-{tenant}/`, and a tenant name holds no `/`,
//! so two tenants' keys differ in their first segment whatever the rest of two templates say.

/// The default `strom.remote.prefix`.
pub const DEFAULT_TEMPLATE: &str = "tenant-{tenant}/{topic}-{topic_id}/{partition}";

/// The first path segment every template must start with.
const TENANT_ROOT: &str = "tenant-{tenant}/";

const PLACEHOLDERS: [&str; 4] = ["{tenant}", "{topic}", "{partition}", "{topic_id}"];

/// Why a template or tenant name is refused (the text goes into INVALID_CONFIG's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(pub String);

/// `strom.tenant`: 1-64 of `[A-Za-z0-9._-]`, not `.` or `..` (a key segment of its own).
pub fn validate_tenant(tenant: &str) -> Result<(), KeyError> {
    let ok_chars = tenant
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if tenant.is_empty() || tenant.len() > 64 || !ok_chars || tenant == "." || tenant == ".." {
        return Err(KeyError(
            "a tenant is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_', '-' (not '.' or '..')"
                .into(),
        ));
    }
    Ok(())
}

/// `strom.remote.prefix`: starts with `tenant-{tenant}/`, names the partition and the topic
/// (by name or id), has no other `{...}`, no empty, `.` or `..` path segment.
pub fn validate_template(template: &str) -> Result<(), KeyError> {
    if !template.starts_with(TENANT_ROOT) {
        return Err(KeyError(format!(
            "the template must begin with {TENANT_ROOT:?} so that tenants never share a prefix"
        )));
    }
    if !template.contains("{partition}") {
        return Err(KeyError("the template must contain {partition}".into()));
    }
    if !template.contains("{topic}") && !template.contains("{topic_id}") {
        return Err(KeyError(
            "the template must contain {topic} or {topic_id}".into(),
        ));
    }
    let mut rest = template.to_string();
    for p in PLACEHOLDERS {
        rest = rest.replace(p, "x");
    }
    if rest.contains('{') || rest.contains('}') {
        return Err(KeyError(
            "unknown placeholder: only {tenant}, {topic}, {partition}, {topic_id}".into(),
        ));
    }
    if template
        .trim_end_matches('/')
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(KeyError(
            "the template has an empty, '.' or '..' path segment".into(),
        ));
    }
    Ok(())
}

/// What a template is rendered with.
#[derive(Debug, Clone)]
pub struct PartitionIdent<'a> {
    pub tenant: &'a str,
    pub topic: &'a str,
    pub partition: i32,
    /// The topic's UUID as 16 bytes (rendered as 32 lowercase hex digits).
    pub topic_id: [u8; 16],
}

/// The partition's prefix, without a trailing `/`. Validates both the template and tenant,
/// so a config that slipped past validation can still not produce a shared prefix.
pub fn render(template: &str, id: &PartitionIdent<'_>) -> Result<String, KeyError> {
    validate_template(template)?;
    validate_tenant(id.tenant)?;
    let topic_id: String = id.topic_id.iter().map(|b| format!("{b:02x}")).collect();
    Ok(template
        .replace("{tenant}", id.tenant)
        .replace("{topic_id}", &topic_id)
        .replace("{topic}", id.topic)
        .replace("{partition}", &id.partition.to_string())
        .trim_end_matches('/')
        .to_string())
}

/// The files of one remote segment (Kafka's `LogSegmentData`), each one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    Log,
    OffsetIndex,
    TimeIndex,
    TxnIndex,
    ProducerSnapshot,
    LeaderEpochs,
}

impl FileKind {
    pub const ALL: [FileKind; 6] = [
        FileKind::Log,
        FileKind::OffsetIndex,
        FileKind::TimeIndex,
        FileKind::TxnIndex,
        FileKind::ProducerSnapshot,
        FileKind::LeaderEpochs,
    ];

    pub fn ext(self) -> &'static str {
        match self {
            FileKind::Log => "log",
            FileKind::OffsetIndex => "index",
            FileKind::TimeIndex => "timeindex",
            FileKind::TxnIndex => "txnindex",
            FileKind::ProducerSnapshot => "snapshot",
            FileKind::LeaderEpochs => "leader-epoch-checkpoint",
        }
    }
}

/// `<prefix>/<20-digit base offset>-<segment id>.<ext>`
pub fn object_key(prefix: &str, base_offset: i64, segment_id: &str, kind: FileKind) -> String {
    format!("{prefix}/{base_offset:020}-{segment_id}.{}", kind.ext())
}

/// Where the manifest is mirrored.
pub fn manifest_key(prefix: &str) -> String {
    format!("{prefix}/manifest.json")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ident<'a>(tenant: &'a str, topic: &'a str) -> PartitionIdent<'a> {
        PartitionIdent {
            tenant,
            topic,
            partition: 3,
            topic_id: [0xab; 16],
        }
    }

    #[test]
    fn given_default_template_when_rendering_then_tenant_topic_id_and_partition() {
        let p = render(DEFAULT_TEMPLATE, &ident("acme", "orders")).unwrap();
        assert_eq!(p, format!("tenant-acme/orders-{}/3", "ab".repeat(16)));
        assert_eq!(
            object_key(&p, 42, "u1", FileKind::TimeIndex),
            format!("{p}/00000000000000000042-u1.timeindex")
        );
        assert_eq!(manifest_key(&p), format!("{p}/manifest.json"));
    }

    #[test]
    fn given_bad_templates_when_validating_then_refused_with_reason() {
        for (t, why) in [
            ("{topic}/{partition}", "begin with"),
            ("x/tenant-{tenant}/{topic}/{partition}", "begin with"),
            ("tenant-{tenant}/{topic}", "{partition}"),
            ("tenant-{tenant}/{partition}", "{topic}"),
            (
                "tenant-{tenant}/{topic}/{partition}/{oops}",
                "unknown placeholder",
            ),
            ("tenant-{tenant}//{topic}/{partition}", "empty"),
            ("tenant-{tenant}/../{topic}/{partition}", "'..'"),
        ] {
            let e = validate_template(t).unwrap_err();
            assert!(e.0.contains(why), "{t}: {e}");
        }
        validate_template("tenant-{tenant}/topic-{topic}/{partition}/").unwrap();
    }

    #[test]
    fn given_bad_tenants_when_validating_then_refused() {
        for t in ["", "a/b", "..", ".", "x y", &"a".repeat(65)] {
            assert!(validate_tenant(t).is_err(), "{t:?}");
            assert!(render(DEFAULT_TEMPLATE, &ident(t, "t")).is_err());
        }
        validate_tenant("team-a.prod_1").unwrap();
    }

    proptest! {
        /// Whatever two valid templates and two different tenants, the rendered prefixes
        /// (and so every key under them) are disjoint.
        #[test]
        fn given_two_tenants_any_templates_then_prefixes_disjoint(
            t1 in "[a-z0-9._-]{1,8}", t2 in "[a-z0-9._-]{1,8}",
            topic in "[a-z]{1,6}", mid in prop::sample::select(vec!["", "x/", "tenant-a/", "a-"]),
        ) {
            prop_assume!(t1 != t2 && t1 != "." && t1 != ".." && t2 != "." && t2 != "..");
            let a = render(&format!("tenant-{{tenant}}/{mid}{{topic}}/{{partition}}"), &ident(&t1, &topic)).unwrap();
            let b = render(DEFAULT_TEMPLATE, &ident(&t2, &topic)).unwrap();
            let (a_dir, b_dir) = (format!("{a}/"), format!("{b}/"));
            prop_assert!(!a_dir.starts_with(&b_dir) && !b_dir.starts_with(&a_dir));
            prop_assert_ne!(a.split('/').next(), b.split('/').next());
        }
    }
}
