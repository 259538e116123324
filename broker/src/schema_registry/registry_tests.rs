//! The registry's decisions against Confluent's documented answers, driven through the
//! records they write (each replayed into the store, as the `_schemas` log would).

use super::error::RegistryError;
use super::registry::{Outcome, Records, Registry, SchemaRequest, VersionId};

fn commit(r: &mut Registry, records: Records) {
    for (k, v) in records {
        let offset = r.store.next_offset;
        r.store.apply(offset, 0, &k, v);
    }
}

fn avro(schema: &str) -> SchemaRequest {
    SchemaRequest {
        schema: Some(schema.into()),
        ..Default::default()
    }
}

fn register(
    r: &mut Registry,
    subject: &str,
    req: &SchemaRequest,
) -> Result<Outcome, RegistryError> {
    let out = r.register(subject, req, false)?;
    commit(r, out.records.clone());
    Ok(out)
}

const V1: &str = r#"{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}"#;
const V2: &str = r#"{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"email","type":["null","string"],"default":null}]}"#;
const BAD: &str = r#"{"type":"record","name":"User","fields":[{"name":"id","type":"string"}]}"#;

#[test]
fn given_new_schemas_when_registering_then_versions_count_up_and_ids_are_global() {
    let mut r = Registry::default();
    let a = register(&mut r, "users-value", &avro(V1)).unwrap();
    assert_eq!((a.value.id, a.value.version), (1, 1));
    let again = register(&mut r, "users-value", &avro(V1)).unwrap();
    assert!(again.records.is_empty(), "re-registering writes nothing");
    assert_eq!((again.value.id, again.value.version), (1, 1));
    let b = register(&mut r, "users-value", &avro(V2)).unwrap();
    assert_eq!((b.value.id, b.value.version), (2, 2));
    // The same schema under another subject keeps its id, with that subject's version 1.
    let c = register(&mut r, "other", &avro(V1)).unwrap();
    assert_eq!((c.value.id, c.value.version), (1, 1));
}

#[test]
fn given_incompatible_schema_when_registering_then_409_naming_the_subject() {
    let mut r = Registry::default();
    register(&mut r, "s", &avro(V1)).unwrap();
    let err = register(&mut r, "s", &avro(BAD)).unwrap_err();
    let RegistryError::Incompatible(msg) = &err else {
        panic!("{err:?}")
    };
    assert!(
        msg.starts_with(
            "Schema being registered is incompatible with an earlier schema for subject \"s\""
        ),
        "{msg}"
    );
    assert_eq!(err.codes().1, 409);
    // NONE lets it through.
    let records = r.set_config(Some("s"), Some("NONE"), None).unwrap().1;
    commit(&mut r, records);
    assert_eq!(register(&mut r, "s", &avro(BAD)).unwrap().value.version, 2);
}

#[test]
fn given_bad_input_when_registering_then_42201_42208_and_no_records() {
    let mut r = Registry::default();
    for (req, code) in [
        (avro("{not json"), 42201),
        (avro(""), 42201),
        (
            SchemaRequest {
                schema: Some("x".into()),
                schema_type: Some("XML".into()),
                ..Default::default()
            },
            42201,
        ),
        (
            SchemaRequest {
                schema: Some("syntax = \"proto3\"; message {".into()),
                schema_type: Some("PROTOBUF".into()),
                ..Default::default()
            },
            42201,
        ),
        (
            SchemaRequest {
                schema: Some(r#"{"type": 12}"#.into()),
                schema_type: Some("JSON".into()),
                ..Default::default()
            },
            42201,
        ),
    ] {
        let err = r.register("s", &req, false).unwrap_err();
        assert_eq!(err.codes().1, code, "{req:?}: {err:?}");
    }
    assert_eq!(
        r.register("", &avro(V1), false).unwrap_err().codes().1,
        42208
    );
    assert!(r.store.is_empty());
}

#[test]
fn given_references_when_registering_then_missing_and_cyclic_ones_are_invalid() {
    let mut r = Registry::default();
    let address = r#"{"type":"record","name":"Address","namespace":"t","fields":[{"name":"city","type":"string"}]}"#;
    register(&mut r, "address", &avro(address)).unwrap();
    let user = SchemaRequest {
        schema: Some(r#"{"type":"record","name":"User","namespace":"t","fields":[{"name":"home","type":"t.Address"}]}"#.into()),
        references: Some(vec![super::records::SchemaReference {
            name: "t.Address".into(),
            subject: "address".into(),
            version: 1,
        }]),
        ..Default::default()
    };
    assert_eq!(register(&mut r, "user", &user).unwrap().value.id, 2);
    // Referenced: cannot be deleted.
    let err = r
        .delete_version("address", VersionId::Number(1), false)
        .unwrap_err();
    assert_eq!(err.codes().1, 42206, "{err:?}");
    let missing = SchemaRequest {
        references: Some(vec![super::records::SchemaReference {
            name: "t.Address".into(),
            subject: "nowhere".into(),
            version: 1,
        }]),
        ..user.clone()
    };
    assert_eq!(
        r.register("user2", &missing, false).unwrap_err().codes().1,
        42201
    );
    // A cycle can only be stored by a writer that skips checks (IMPORT of a foreign log):
    // resolving it must end with an error, not a stack overflow.
    let cyclic = |name: &str, to: &str| super::records::SchemaValue {
        subject: name.into(),
        version: 1,
        id: 90,
        md5: None,
        schema_type: "AVRO".into(),
        references: vec![super::records::SchemaReference {
            name: "x".into(),
            subject: to.into(),
            version: 1,
        }],
        metadata: None,
        rule_set: None,
        schema: "\"int\"".into(),
        deleted: false,
    };
    for (a, b) in [("ca", "cb"), ("cb", "ca")] {
        commit(
            &mut r,
            vec![(
                super::records::RegistryKey::Schema {
                    subject: a.into(),
                    version: 1,
                },
                Some(super::records::RegistryValue::Schema(cyclic(a, b))),
            )],
        );
    }
    let via_cycle = SchemaRequest {
        references: Some(vec![super::records::SchemaReference {
            name: "x".into(),
            subject: "ca".into(),
            version: 1,
        }]),
        ..avro("\"int\"")
    };
    let err = r.register("cz", &via_cycle, false).unwrap_err();
    assert_eq!(err.codes().1, 42201, "{err:?}");
}

#[test]
fn given_soft_and_hard_deletes_then_confluents_order_of_checks() {
    let mut r = Registry::default();
    register(&mut r, "s", &avro(V1)).unwrap();
    register(&mut r, "s", &avro(V2)).unwrap();
    // Hard delete before soft: 40407.
    let err = r
        .delete_version("s", VersionId::Number(1), true)
        .unwrap_err();
    assert_eq!(err.codes().1, 40407);
    let (v, records) = r.delete_version("s", VersionId::Number(1), false).unwrap();
    assert_eq!(v, 1);
    commit(&mut r, records);
    // Soft-deleting again: 40406; reading it: 40402 unless deleted=true.
    assert_eq!(
        r.delete_version("s", VersionId::Number(1), false)
            .unwrap_err()
            .codes()
            .1,
        40406
    );
    assert_eq!(
        r.get_version("s", VersionId::Number(1), false)
            .unwrap_err()
            .codes()
            .1,
        40402
    );
    assert!(r.get_version("s", VersionId::Number(1), true).is_ok());
    assert_eq!(
        r.get_version("nope", VersionId::Latest, false)
            .unwrap_err()
            .codes()
            .1,
        40401
    );
    // Subject: permanent first is 40405, soft then permanent works.
    assert_eq!(r.delete_subject("s", true).unwrap_err().codes().1, 40405);
    let (versions, records) = r.delete_subject("s", false).unwrap();
    assert_eq!(versions, vec![2]);
    commit(&mut r, records);
    assert_eq!(r.delete_subject("s", false).unwrap_err().codes().1, 40404);
    let (versions, records) = r.delete_subject("s", true).unwrap();
    assert_eq!(versions, vec![1, 2]);
    commit(&mut r, records);
    assert_eq!(r.delete_subject("s", true).unwrap_err().codes().1, 40401);
    // Ids outlive their subjects: a new schema gets a new id.
    let next = register(&mut r, "s", &avro(r#""string""#)).unwrap();
    assert_eq!(
        (next.value.id, next.value.version),
        (3, 1),
        "versions restart after a hard delete"
    );
}

#[test]
fn given_modes_then_readonly_refuses_writes_and_import_needs_an_empty_registry() {
    let mut r = Registry::default();
    register(&mut r, "s", &avro(V1)).unwrap();
    let records = r.set_mode(Some("s"), "READONLY", false).unwrap().1;
    commit(&mut r, records);
    let err = r.register("s", &avro(V2), false).unwrap_err();
    assert_eq!(err.codes().1, 42205);
    assert_eq!(
        err.to_string(),
        "Subject s in context . is in read-only mode"
    );
    assert_eq!(
        r.set_mode(None, "SIDEWAYS", false).unwrap_err().codes().1,
        42204
    );
    assert_eq!(
        r.set_mode(None, "IMPORT", false).unwrap_err().codes().1,
        42205
    );
    let records = r.delete_mode("s").unwrap().1;
    commit(&mut r, records);
    // An id in READWRITE mode: refused.
    let with_id = SchemaRequest {
        id: Some(100),
        version: Some(1),
        ..avro(V1)
    };
    assert_eq!(
        r.register("t", &with_id, false).unwrap_err().codes().1,
        42205
    );
    // IMPORT (forced) keeps given ids and versions.
    let records = r.set_mode(None, "IMPORT", true).unwrap().1;
    commit(&mut r, records);
    let imported = register(&mut r, "t", &with_id).unwrap();
    assert_eq!((imported.value.id, imported.value.version), (100, 1));
    let clash = SchemaRequest {
        id: Some(100),
        version: Some(2),
        ..avro(V2)
    };
    assert_eq!(r.register("t", &clash, false).unwrap_err().codes().1, 42205);
}

#[test]
fn given_config_then_levels_resolve_subject_before_global() {
    let mut r = Registry::default();
    assert_eq!(r.level(Some("s")).as_str(), "BACKWARD");
    let records = r.set_config(None, Some("full"), None).unwrap().1;
    commit(&mut r, records);
    assert_eq!(r.level(Some("s")).as_str(), "FULL");
    let records = r.set_config(Some("s"), Some("NONE"), None).unwrap().1;
    commit(&mut r, records);
    assert_eq!(r.level(Some("s")).as_str(), "NONE");
    assert_eq!(
        r.set_config(None, Some("MOSTLY"), None)
            .unwrap_err()
            .codes()
            .1,
        42203
    );
    let (old, records) = r.delete_config(Some("s")).unwrap();
    assert_eq!(old.compatibility_level.as_deref(), Some("NONE"));
    commit(&mut r, records);
    assert_eq!(r.level(Some("s")).as_str(), "FULL");
    assert_eq!(r.delete_config(Some("s")).unwrap_err().codes().1, 40401);
}

#[test]
fn given_lookup_then_found_version_or_40401_40403() {
    let mut r = Registry::default();
    register(&mut r, "s", &avro(V1)).unwrap();
    let spaced = V1.replace(',', " , ");
    assert_eq!(
        r.lookup("s", &avro(&spaced), false, false)
            .unwrap()
            .value
            .version,
        1
    );
    assert_eq!(
        r.lookup("s", &avro(V2), false, false)
            .unwrap_err()
            .codes()
            .1,
        40403
    );
    assert_eq!(
        r.lookup("x", &avro(V1), false, false)
            .unwrap_err()
            .codes()
            .1,
        40401
    );
}

#[test]
fn given_version_strings_then_latest_numbers_or_42202() {
    assert_eq!(VersionId::parse("latest").unwrap(), VersionId::Latest);
    assert_eq!(VersionId::parse("-1").unwrap(), VersionId::Latest);
    assert_eq!(VersionId::parse("7").unwrap(), VersionId::Number(7));
    for bad in ["0", "-2", "x", "2147483648", ""] {
        assert_eq!(VersionId::parse(bad).unwrap_err().codes().1, 42202, "{bad}");
    }
}
