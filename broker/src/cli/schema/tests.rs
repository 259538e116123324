use clap::Parser;

use super::schemas::{
    parse_reference, schema_body, Compatibility, Listed, ListedSchema, SchemaInfo, Schemas,
};
use super::settings::{targets, Setting, Settings, SubjectDeleted, SubjectsDeleted};
use super::*;
use crate::cli::output::render;
use serde_json::{json, Value};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Top,
}

#[derive(clap::Subcommand)]
enum Top {
    Schema(SchemaArgs),
}

fn parse(args: &[&str]) -> SchemaArgs {
    let argv = ["strom", "schema"].iter().chain(args).copied();
    match Cli::try_parse_from(argv)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .cmd
    {
        Top::Schema(a) => a,
    }
}

fn parse_err(args: &[&str]) -> clap::error::ErrorKind {
    let argv = ["strom", "schema"].iter().chain(args).copied();
    match Cli::try_parse_from(argv) {
        Ok(_) => panic!("{args:?} parsed"),
        Err(e) => e.kind(),
    }
}

#[test]
fn given_create_with_type_and_references_when_parsed_then_body_is_confluents() {
    let a = parse(&[
        "create",
        "orders-value",
        "--schema",
        "o.txt",
        "--type",
        "protobuf",
        "--references",
        "common.proto:common:1,other.proto:other:3",
        "--registry-url",
        "http://sr:8081",
        "--format",
        "json",
    ]);
    assert_eq!(a.registry_url, "http://sr:8081");
    assert_eq!(a.format, Format::Json);
    let SchemaCmd::Create {
        subject,
        schema,
        normalize,
    } = a.cmd
    else {
        panic!("not create")
    };
    assert_eq!((subject.as_str(), normalize), ("orders-value", false));
    let body = schema_body(&schema, "syntax = \"proto3\";".into()).unwrap();
    assert_eq!(
        body,
        json!({"schema": "syntax = \"proto3\";", "schemaType": "PROTOBUF", "references": [
            {"name": "common.proto", "subject": "common", "version": 1},
            {"name": "other.proto", "subject": "other", "version": 3}]})
    );
}

#[test]
fn given_no_type_when_body_made_then_extension_decides_or_usage_error() {
    let file = |p: &str| SchemaFile {
        path: p.into(),
        schema_type: None,
        references: vec![],
    };
    let t = |p: &str| schema_body(&file(p), "x".into()).map(|b| b["schemaType"].clone());
    assert_eq!(t("a.avsc").unwrap(), "AVRO");
    assert_eq!(t("a.proto").unwrap(), "PROTOBUF");
    assert_eq!(t("a.json").unwrap(), "JSON");
    let e = t("schema.txt").unwrap_err();
    assert_eq!(e.exit_code(), crate::cli::error::EXIT_USAGE);
    assert!(e.to_string().contains("--type"), "{e}");
    // No references: no `references` field (Confluent's own clients leave it out).
    assert!(schema_body(&file("a.avsc"), "x".into())
        .unwrap()
        .get("references")
        .is_none());
}

#[test]
fn given_references_when_parsed_then_name_may_hold_colons() {
    let r = parse_reference("https://example.com/a.json:a-value:2").unwrap();
    assert_eq!(
        (r.name.as_str(), r.subject.as_str(), r.version),
        ("https://example.com/a.json", "a-value", 2)
    );
    for bad in ["a:b", "a:b:x", ":b:1", "a::1", "a:b:0", "plain"] {
        assert!(parse_reference(bad).is_err(), "{bad}");
    }
}

#[test]
fn given_subcommands_when_parsed_then_defaults_and_conflicts_as_documented() {
    let a = parse(&["get", "s"]);
    assert_eq!(a.registry_url, "http://127.0.0.1:8081");
    assert!(matches!(a.cmd, SchemaCmd::Get { ref version, id: None, .. } if version == "latest"));
    assert!(matches!(
        parse(&["get", "--id", "7"]).cmd,
        SchemaCmd::Get {
            id: Some(7),
            subject: None,
            ..
        }
    ));
    assert_eq!(
        parse_err(&["get", "s", "--id", "1", "--schema-version", "2"]),
        clap::error::ErrorKind::ArgumentConflict
    );
    assert_eq!(
        parse_err(&["delete", "s"]),
        clap::error::ErrorKind::MissingRequiredArgument
    );
    assert_eq!(
        parse_err(&["create", "s", "--schema", "f", "--type", "xml"]),
        clap::error::ErrorKind::InvalidValue
    );
    assert_eq!(
        parse_err(&["subject", "delete"]),
        clap::error::ErrorKind::MissingRequiredArgument
    );
    assert!(matches!(
        parse(&["delete", "s", "--schema-version", "2", "--permanent"]).cmd,
        SchemaCmd::Delete { permanent: true, ref version, .. } if version == "2"
    ));
    assert!(matches!(
        parse(&["compatibility-level", "set", "a", "b", "--level", "full"]).cmd,
        SchemaCmd::CompatibilityLevel(LevelCmd::Set { ref subjects, ref level, global: false }) if subjects.len() == 2 && level == "full"
    ));
    assert!(matches!(
        parse(&["mode", "set", "--mode", "IMPORT", "--force"]).cmd,
        SchemaCmd::Mode(ModeCmd::Set { force: true, .. })
    ));
    assert!(matches!(
        parse(&["check-compatibility", "s", "--schema", "x.avsc"]).cmd,
        SchemaCmd::CheckCompatibility { ref version, .. } if version == "latest"
    ));
}

#[test]
fn given_subjects_or_none_when_targeted_then_global_without_subjects_or_with_flag() {
    assert_eq!(targets(vec![], false), vec![None]);
    assert_eq!(
        targets(vec!["a".into()], false),
        vec![Some("a".to_string())]
    );
    assert_eq!(
        targets(vec!["a".into()], true),
        vec![None, Some("a".to_string())]
    );
}

#[test]
fn given_schemas_when_rendered_then_table_and_json_fields() {
    let s = Schemas(vec![
        SchemaInfo {
            subject: Some("users-value".into()),
            version: Some(2),
            id: 11,
            schema_type: "AVRO".into(),
            schema: "\"string\"".into(),
            references: vec![],
        },
        SchemaInfo {
            subject: None,
            version: None,
            id: 3,
            schema_type: "PROTOBUF".into(),
            schema: "syntax".into(),
            references: vec![],
        },
    ]);
    assert_eq!(
        render(&s, Format::Table),
        "SUBJECT      VERSION  ID  TYPE\nusers-value  2        11  AVRO\n-            -        3   PROTOBUF\n"
    );
    let j: Value = serde_json::from_str(&render(&s, Format::Json)).unwrap();
    assert_eq!(
        j[0],
        json!({"subject": "users-value", "version": 2, "id": 11, "type": "AVRO", "schema": "\"string\"", "references": []})
    );
    let l = Listed(vec![ListedSchema {
        subject: "a".into(),
        version: 1,
        id: 1,
        schema_type: "JSON".into(),
    }]);
    assert_eq!(
        render(&l, Format::Table),
        "SUBJECT  VERSION  ID  TYPE\na        1        1   JSON\n"
    );
}

#[test]
fn given_compatibility_answers_when_rendered_then_reasons_follow() {
    let yes = Compatibility {
        compatible: true,
        messages: vec![],
    };
    assert_eq!(render(&yes, Format::Table), "COMPATIBLE\ntrue\n");
    let no = Compatibility {
        compatible: false,
        messages: vec!["{errorType:\"X\"}".into(), "{oldSchemaVersion: 1}".into()],
    };
    assert_eq!(
        render(&no, Format::Table),
        "COMPATIBLE\nfalse\n\nREASON\n{errorType:\"X\"}\n{oldSchemaVersion: 1}\n"
    );
    let j: Value = serde_json::from_str(&render(&no, Format::Json)).unwrap();
    assert_eq!(j["compatible"], false);
    assert_eq!(j["messages"].as_array().unwrap().len(), 2);
}

#[test]
fn given_settings_and_deletes_with_errors_when_rendered_then_error_cells() {
    let err = ItemError {
        code: 40401,
        http_status: 404,
        message: "Subject 'b' not found.".into(),
    };
    let s = Settings(vec![
        Setting {
            subject: GLOBAL.into(),
            value: Some("BACKWARD".into()),
            error: None,
        },
        Setting {
            subject: "b".into(),
            value: None,
            error: Some(err.clone()),
        },
    ]);
    assert_eq!(
        render(&s, Format::Table),
        "SUBJECT   VALUE     ERROR\n{GLOBAL}  BACKWARD  -\nb         -         Subject 'b' not found. (40401)\n"
    );
    let j: Value = serde_json::from_str(&render(&s, Format::Json)).unwrap();
    assert_eq!(
        j[1]["error"],
        json!({"code": 40401, "http_status": 404, "message": "Subject 'b' not found."})
    );
    let d = SubjectsDeleted(vec![
        SubjectDeleted {
            subject: "a".into(),
            versions: vec![1, 2],
            permanent: false,
            error: None,
        },
        SubjectDeleted {
            subject: "b".into(),
            versions: vec![],
            permanent: true,
            error: Some(err),
        },
    ]);
    assert_eq!(
        render(&d, Format::Table),
        "SUBJECT  VERSIONS  DELETED  ERROR\na        1,2       soft     -\nb        -         -        Subject 'b' not found. (40401)\n"
    );
}
