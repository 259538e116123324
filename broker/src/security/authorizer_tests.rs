//! Table tests of Kafka's matching rules (the cases of Kafka's `StandardAuthorizerTest` and
//! `AuthorizerTest`, restated).

use super::*;
use crate::metadata::acls::FileAclStore;
use Operation::*;
use PatternType::{Literal, Prefixed};
use Permission::{Allow, Deny};
use ResourceType::{Cluster, Group, Topic, TransactionalId};

fn acl(
    rtype: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    host: &str,
    op: Operation,
    perm: Permission,
) -> AclBinding {
    AclBinding {
        resource_type: rtype,
        resource_name: name.into(),
        pattern_type: pattern,
        principal: principal.into(),
        host: host.into(),
        operation: op,
        permission: perm,
    }
}

fn authorizer(acls: &[AclBinding], allow_everyone: bool) -> (tempfile::TempDir, Authorizer) {
    let dir = tempfile::tempdir().unwrap();
    let store = FileAclStore::open(dir.path()).unwrap();
    store.create(acls).unwrap();
    let a = Authorizer::new(Arc::new(store), "User:admin; User:root", allow_everyone);
    (dir, a)
}

const ALICE: &str = "User:alice";
const IP: &str = "127.0.0.1";

#[test]
fn kafkas_matching_rules() {
    // (acls, allow.everyone, principal, host, op, type, name, allowed)
    type Row = (
        Vec<AclBinding>,
        bool,
        &'static str,
        &'static str,
        Operation,
        ResourceType,
        &'static str,
        bool,
    );
    let allow_read = |name: &str, p| acl(Topic, name, p, ALICE, "*", Read, Allow);
    let table: Vec<Row> = vec![
        // No ACLs: denied, unless allow.everyone.if.no.acl.found.
        (vec![], false, ALICE, IP, Read, Topic, "t", false),
        (vec![], true, ALICE, IP, Read, Topic, "t", true),
        // Super users pass everything, DENY included.
        (
            vec![],
            false,
            "User:admin",
            IP,
            Alter,
            Cluster,
            "kafka-cluster",
            true,
        ),
        (
            vec![acl(Topic, "t", Literal, "User:root", "*", All, Deny)],
            false,
            "User:root",
            IP,
            Write,
            Topic,
            "t",
            true,
        ),
        // Literal, wildcard and prefixed patterns.
        (
            vec![allow_read("t", Literal)],
            false,
            ALICE,
            IP,
            Read,
            Topic,
            "t",
            true,
        ),
        (
            vec![allow_read("t", Literal)],
            false,
            ALICE,
            IP,
            Read,
            Topic,
            "t2",
            false,
        ),
        (
            vec![allow_read("*", Literal)],
            false,
            ALICE,
            IP,
            Read,
            Topic,
            "any",
            true,
        ),
        (
            vec![allow_read("ord", Prefixed)],
            false,
            ALICE,
            IP,
            Read,
            Topic,
            "orders",
            true,
        ),
        (
            vec![allow_read("ord", Prefixed)],
            false,
            ALICE,
            IP,
            Read,
            Topic,
            "or",
            false,
        ),
        // `*` as a prefix is a literal character, not a wildcard.
        (
            vec![allow_read("*", Prefixed)],
            false,
            ALICE,
            IP,
            Read,
            Topic,
            "x",
            false,
        ),
        // An ACL on the resource for someone else: the resource has ACLs, so even with
        // allow.everyone the others are denied.
        (
            vec![acl(Topic, "t", Literal, "User:bob", "*", Read, Allow)],
            true,
            ALICE,
            IP,
            Read,
            Topic,
            "t",
            false,
        ),
        // ... while a resource the ACL does not cover stays open.
        (
            vec![acl(Topic, "t", Literal, "User:bob", "*", Read, Allow)],
            true,
            ALICE,
            IP,
            Read,
            Topic,
            "u",
            true,
        ),
        // Wildcard principal; resource types do not mix.
        (
            vec![acl(Topic, "t", Literal, "User:*", "*", Read, Allow)],
            false,
            ALICE,
            IP,
            Read,
            Topic,
            "t",
            true,
        ),
        (
            vec![allow_read("t", Literal)],
            false,
            ALICE,
            IP,
            Read,
            Group,
            "t",
            false,
        ),
        // Hosts.
        (
            vec![acl(Topic, "t", Literal, ALICE, "10.0.0.1", Read, Allow)],
            false,
            ALICE,
            IP,
            Read,
            Topic,
            "t",
            false,
        ),
        (
            vec![acl(Topic, "t", Literal, ALICE, IP, Read, Allow)],
            false,
            ALICE,
            IP,
            Read,
            Topic,
            "t",
            true,
        ),
        // DENY wins, from any pattern.
        (
            vec![
                allow_read("t", Literal),
                acl(Topic, "t", Prefixed, "User:*", "*", Read, Deny),
            ],
            false,
            ALICE,
            IP,
            Read,
            Topic,
            "t",
            false,
        ),
        (
            vec![
                acl(Topic, "*", Literal, ALICE, "*", All, Allow),
                acl(Topic, "t", Literal, ALICE, IP, Write, Deny),
            ],
            false,
            ALICE,
            IP,
            Write,
            Topic,
            "t",
            false,
        ),
        // ALL allows everything; implied DESCRIBE from READ/WRITE/DELETE/ALTER.
        (
            vec![acl(Topic, "t", Literal, ALICE, "*", All, Allow)],
            false,
            ALICE,
            IP,
            Delete,
            Topic,
            "t",
            true,
        ),
        (
            vec![allow_read("t", Literal)],
            false,
            ALICE,
            IP,
            Describe,
            Topic,
            "t",
            true,
        ),
        (
            vec![allow_read("t", Literal)],
            false,
            ALICE,
            IP,
            Write,
            Topic,
            "t",
            false,
        ),
        (
            vec![acl(Topic, "t", Literal, ALICE, "*", Alter, Allow)],
            false,
            ALICE,
            IP,
            Describe,
            Topic,
            "t",
            true,
        ),
        (
            vec![acl(Topic, "t", Literal, ALICE, "*", AlterConfigs, Allow)],
            false,
            ALICE,
            IP,
            DescribeConfigs,
            Topic,
            "t",
            true,
        ),
        (
            vec![acl(Topic, "t", Literal, ALICE, "*", Create, Allow)],
            false,
            ALICE,
            IP,
            Describe,
            Topic,
            "t",
            false,
        ),
        // A DENY of READ does not deny DESCRIBE (DENY implies nothing).
        (
            vec![
                acl(Topic, "t", Literal, ALICE, "*", Describe, Allow),
                acl(Topic, "t", Literal, ALICE, "*", Read, Deny),
            ],
            false,
            ALICE,
            IP,
            Describe,
            Topic,
            "t",
            true,
        ),
        // DENY ALL denies DESCRIBE too.
        (
            vec![
                acl(Topic, "t", Literal, ALICE, "*", Read, Allow),
                acl(Topic, "t", Literal, ALICE, "*", All, Deny),
            ],
            false,
            ALICE,
            IP,
            Describe,
            Topic,
            "t",
            false,
        ),
        (
            vec![acl(
                TransactionalId,
                "tx",
                Literal,
                ALICE,
                "*",
                Write,
                Allow,
            )],
            false,
            ALICE,
            IP,
            Describe,
            TransactionalId,
            "tx",
            true,
        ),
    ];
    for (i, (acls, everyone, p, h, op, t, name, want)) in table.into_iter().enumerate() {
        let (_dir, a) = authorizer(&acls, everyone);
        assert_eq!(
            a.authorize(p, h, op, t, name),
            want,
            "row {i}: {p}@{h} {op:?} {t:?}:{name} with {acls:?}"
        );
    }
}

#[test]
fn authorize_by_resource_type_follows_kafkas_dominance_rules() {
    type Row = (Vec<AclBinding>, bool);
    let allow = |name: &str, p| acl(Topic, name, p, ALICE, "*", Write, Allow);
    let deny = |name: &str, p| acl(Topic, name, p, ALICE, "*", Write, Deny);
    let table: Vec<Row> = vec![
        (vec![], false),
        (vec![allow("t", Literal)], true),
        (vec![allow("t", Prefixed)], true),
        (vec![allow("t", Literal), deny("t", Literal)], false),
        (vec![allow("t", Literal), deny("t", Prefixed)], false),
        (vec![allow("tab", Prefixed), deny("t", Prefixed)], false),
        (
            vec![allow("t", Literal), allow("u", Literal), deny("t", Literal)],
            true,
        ),
        (vec![allow("t", Literal), deny("*", Literal)], false),
        (vec![allow("*", Literal), deny("t", Literal)], true),
        (
            vec![acl(Topic, "t", Literal, ALICE, "*", Read, Allow)],
            false,
        ),
        (vec![acl(Topic, "t", Literal, ALICE, "*", All, Allow)], true),
    ];
    for (i, (acls, want)) in table.into_iter().enumerate() {
        let (_dir, a) = authorizer(&acls, false);
        assert_eq!(
            a.authorize_by_resource_type(ALICE, IP, Write, Topic),
            want,
            "row {i}: {acls:?}"
        );
    }
    let (_dir, a) = authorizer(&[deny("*", Literal)], false);
    assert!(a.authorize_by_resource_type("User:admin", IP, Write, Topic));
}

#[test]
fn authorized_operations_are_kafkas_bit_field() {
    let (_dir, a) = authorizer(&[acl(Topic, "t", Literal, ALICE, "*", Read, Allow)], false);
    let bits = a.authorized_operations(ALICE, IP, Topic, "t");
    assert_eq!(
        bits,
        (1 << 3) | (1 << 8),
        "READ and the DESCRIBE it implies"
    );
    assert_eq!(
        all_operations(Group),
        (1 << 3) | (1 << 8) | (1 << 6) | (1 << 10) | (1 << 11)
    );
    assert_eq!(
        Access::open().operations(false, Topic, "t"),
        OPERATIONS_NOT_REQUESTED
    );
    assert_eq!(
        Access::open().operations(true, Topic, "t"),
        all_operations(Topic)
    );
}
