//! `strom acl create|list|delete`: CreateAcls, DescribeAcls, DeleteAcls with rpk's flags.
//!
//! `create` makes the cross product of principals (`--allow-principal`, `--deny-principal`),
//! hosts, operations and resources (`--topic`, `--group`, `--transactional-id`, `--cluster`),
//! as rpk and `kafka-acls.sh --add` do. `list` and `delete` turn the same flags into filters:
//! a flag not given matches anything, so `strom acl list` lists every ACL.

use clap::{Args, Subcommand, ValueEnum};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use super::client::{Client, ANY};
use super::error::{CliError, ItemError};
use super::output::{Format, Render, Table};
use crate::security::acl;

/// Kafka's resource name of the cluster.
const CLUSTER_NAME: &str = "kafka-cluster";

#[derive(Subcommand)]
pub enum AclCmd {
    /// Create ACLs: every principal × host × operation × resource given.
    Create(AclFlags),
    /// List the ACLs matching the flags (every ACL without any).
    List(AclFlags),
    /// Delete the ACLs matching the flags; prints what was deleted.
    Delete(AclFlags),
}

#[derive(Args, Clone, Default)]
pub struct AclFlags {
    /// Principal to allow, `User:NAME` (a bare NAME means User:NAME), repeatable.
    #[arg(long)]
    pub allow_principal: Vec<String>,
    /// Principal to deny, `User:NAME`, repeatable.
    #[arg(long)]
    pub deny_principal: Vec<String>,
    /// Host (client IP) the ACL applies to, repeatable; `*` (the default for create) is any.
    #[arg(long)]
    pub host: Vec<String>,
    /// Operation, repeatable: all, read, write, create, delete, alter, describe,
    /// cluster_action, describe_configs, alter_configs, idempotent_write (and any, to filter).
    #[arg(long, value_enum)]
    pub operation: Vec<Operation>,
    /// Topic, repeatable (`*` is every topic).
    #[arg(long)]
    pub topic: Vec<String>,
    /// Consumer group, repeatable.
    #[arg(long)]
    pub group: Vec<String>,
    /// Transactional id, repeatable.
    #[arg(long)]
    pub transactional_id: Vec<String>,
    /// The cluster itself.
    #[arg(long)]
    pub cluster: bool,
    /// How resource names match: literal or prefixed (create); also match (what applies to
    /// the name) or any (list, delete). Default literal, any for `list`.
    #[arg(long, value_enum)]
    pub resource_pattern_type: Option<PatternType>,
}

macro_rules! wire_enum {
    ($name:ident { $($variant:ident = $code:expr, $text:expr;)* }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
        #[value(rename_all = "snake_case")]
        pub enum $name { $($variant),* }
        impl $name {
            pub fn code(self) -> i8 { match self { $(Self::$variant => $code),* } }
        }
    };
}

wire_enum!(Operation {
    Any = 1, "ANY";
    All = 2, "ALL";
    Read = 3, "READ";
    Write = 4, "WRITE";
    Create = 5, "CREATE";
    Delete = 6, "DELETE";
    Alter = 7, "ALTER";
    Describe = 8, "DESCRIBE";
    ClusterAction = 9, "CLUSTER_ACTION";
    DescribeConfigs = 10, "DESCRIBE_CONFIGS";
    AlterConfigs = 11, "ALTER_CONFIGS";
    IdempotentWrite = 12, "IDEMPOTENT_WRITE";
});

wire_enum!(PatternType {
    Any = 1, "ANY";
    Match = 2, "MATCH";
    Literal = 3, "LITERAL";
    Prefixed = 4, "PREFIXED";
});

/// Kafka's name for a wire code, from the broker's own tables (security/acl.rs); a code
/// Kafka has no name for prints as `UNKNOWN(code)`.
fn kafka_name(code: i8, name: &'static str) -> String {
    if name == "UNKNOWN" {
        format!("UNKNOWN({code})")
    } else {
        name.to_string()
    }
}

fn resource_type_name(code: i8) -> String {
    kafka_name(code, acl::ResourceType::from_code(code).name())
}

fn pattern_name(code: i8) -> String {
    kafka_name(code, acl::PatternType::from_code(code).name())
}

fn operation_name(code: i8) -> String {
    kafka_name(code, acl::Operation::from_code(code).name())
}

fn permission_name(code: i8) -> String {
    kafka_name(code, acl::Permission::from_code(code).name())
}

const PERMISSION_DENY: i8 = 2;
const PERMISSION_ALLOW: i8 = 3;
const WILDCARD_HOST: &str = "*";

/// One ACL as the commands print it.
#[derive(Debug, Clone, Serialize)]
pub struct AclEntry {
    pub principal: String,
    pub host: String,
    pub resource_type: String,
    pub resource_name: String,
    pub pattern_type: String,
    pub operation: String,
    pub permission: String,
    /// For `create` and `delete`: this ACL's error (`null` when it was done).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Option<ItemError>>,
}

#[derive(Serialize)]
#[serde(transparent)]
pub struct AclList(pub Vec<AclEntry>);

impl Render for AclList {
    fn table(&self, t: &mut Table) {
        let with_errors = self.0.iter().any(|a| a.error.is_some());
        let mut header = vec![
            "PRINCIPAL",
            "HOST",
            "RESOURCE-TYPE",
            "RESOURCE-NAME",
            "PATTERN-TYPE",
            "OPERATION",
            "PERMISSION",
        ];
        if with_errors {
            header.push("ERROR");
        }
        t.header(&header);
        for a in &self.0 {
            let mut row = vec![
                a.principal.clone(),
                a.host.clone(),
                a.resource_type.clone(),
                a.resource_name.clone(),
                a.pattern_type.clone(),
                a.operation.clone(),
                a.permission.clone(),
            ];
            if with_errors {
                row.push(match a.error.as_ref().and_then(|e| e.as_ref()) {
                    None => "OK".into(),
                    Some(e) => match &e.message {
                        Some(m) => format!("{}: {m}", e.name),
                        None => e.name.clone(),
                    },
                });
            }
            t.row(row);
        }
    }
}

fn principal(p: &str) -> String {
    if p.contains(':') {
        p.to_string()
    } else {
        format!("User:{p}")
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

impl AclFlags {
    /// (resource type, name) of every resource flag.
    fn resources(&self) -> Vec<(i8, String)> {
        let mut r: Vec<(i8, String)> = Vec::new();
        r.extend(self.topic.iter().map(|t| (2, t.clone())));
        r.extend(self.group.iter().map(|g| (3, g.clone())));
        if self.cluster {
            r.push((4, CLUSTER_NAME.into()));
        }
        r.extend(self.transactional_id.iter().map(|t| (5, t.clone())));
        r
    }

    /// (principal, permission) pairs.
    fn principals(&self) -> Vec<(String, i8)> {
        let allow = self
            .allow_principal
            .iter()
            .map(|p| (principal(p), PERMISSION_ALLOW));
        let deny = self
            .deny_principal
            .iter()
            .map(|p| (principal(p), PERMISSION_DENY));
        allow.chain(deny).collect()
    }

    fn creations(&self) -> Result<Vec<AclCreation>, CliError> {
        let pattern = self.resource_pattern_type.unwrap_or(PatternType::Literal);
        if !matches!(pattern, PatternType::Literal | PatternType::Prefixed) {
            return Err(CliError::Usage(
                "create takes --resource-pattern-type literal or prefixed".into(),
            ));
        }
        let principals = self.principals();
        let resources = self.resources();
        if principals.is_empty() || resources.is_empty() || self.operation.is_empty() {
            return Err(CliError::Usage(
                "create needs a principal (--allow-principal/--deny-principal), an --operation and a resource (--topic, --group, --transactional-id, --cluster)".into(),
            ));
        }
        if self.operation.contains(&Operation::Any) {
            return Err(CliError::Usage(
                "`any` is a filter: create takes `all` for every operation".into(),
            ));
        }
        let hosts = if self.host.is_empty() {
            vec![WILDCARD_HOST.to_string()]
        } else {
            self.host.clone()
        };
        let mut out = Vec::new();
        for (p, permission) in &principals {
            for h in &hosts {
                for op in &self.operation {
                    for (rtype, rname) in &resources {
                        out.push(
                            AclCreation::default()
                                .with_resource_type(*rtype)
                                .with_resource_name(s(rname))
                                .with_resource_pattern_type(pattern.code())
                                .with_principal(s(p))
                                .with_host(s(h))
                                .with_operation(op.code())
                                .with_permission_type(*permission),
                        );
                    }
                }
            }
        }
        Ok(out)
    }

    /// The filters `list`/`delete` send: each combination of the flags given, a flag not
    /// given matching anything.
    fn filters(&self, default_pattern: PatternType) -> Vec<DeleteAclsFilter> {
        let pattern = self.resource_pattern_type.unwrap_or(default_pattern);
        let resources: Vec<(i8, Option<String>, i8)> = match self.resources() {
            r if r.is_empty() => vec![(1, None, PatternType::Any.code())],
            r => r
                .into_iter()
                .map(|(t, n)| (t, Some(n), pattern.code()))
                .collect(),
        };
        let principals: Vec<(Option<String>, i8)> = match self.principals() {
            p if p.is_empty() => vec![(None, 1)],
            p => p.into_iter().map(|(p, perm)| (Some(p), perm)).collect(),
        };
        let hosts: Vec<Option<String>> = match &self.host {
            h if h.is_empty() => vec![None],
            h => h.iter().cloned().map(Some).collect(),
        };
        let ops: Vec<i8> = match &self.operation {
            o if o.is_empty() => vec![Operation::Any.code()],
            o => o.iter().map(|o| o.code()).collect(),
        };
        let mut out = Vec::new();
        for (rtype, rname, pat) in &resources {
            for (p, perm) in &principals {
                for h in &hosts {
                    for op in &ops {
                        out.push(
                            DeleteAclsFilter::default()
                                .with_resource_type_filter(*rtype)
                                .with_resource_name_filter(rname.as_deref().map(s))
                                .with_pattern_type_filter(*pat)
                                .with_principal_filter(p.as_deref().map(s))
                                .with_host_filter(h.as_deref().map(s))
                                .with_operation(*op)
                                .with_permission_type(*perm),
                        );
                    }
                }
            }
        }
        out
    }
}

pub async fn run(client: &mut Client, cmd: AclCmd, format: Format) -> Result<(), CliError> {
    let (list, failed) = match cmd {
        AclCmd::Create(f) => create(client, &f).await?,
        AclCmd::List(f) => (list(client, &f).await?, 0),
        AclCmd::Delete(f) => delete(client, &f).await?,
    };
    let total = list.len();
    super::output::print(&AclList(list), format)?;
    if failed > 0 {
        return Err(CliError::Partial { failed, total });
    }
    Ok(())
}

/// CreateAcls; each ACL with its result, and how many failed.
pub async fn create(
    client: &mut Client,
    flags: &AclFlags,
) -> Result<(Vec<AclEntry>, usize), CliError> {
    let creations = flags.creations()?;
    let req = CreateAclsRequest::default().with_creations(creations.clone());
    let (resp, _) = client.call(ANY, &req, 3).await?;
    if resp.results.len() != creations.len() {
        return Err(CliError::Client(format!(
            "CreateAcls: {} results for {} ACLs",
            resp.results.len(),
            creations.len()
        )));
    }
    let mut failed = 0;
    let out = creations
        .iter()
        .zip(&resp.results)
        .map(|(c, r)| {
            let error = ItemError::from_code(
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            );
            failed += usize::from(error.is_some());
            AclEntry {
                principal: c.principal.to_string(),
                host: c.host.to_string(),
                resource_type: resource_type_name(c.resource_type),
                resource_name: c.resource_name.to_string(),
                pattern_type: pattern_name(c.resource_pattern_type),
                operation: operation_name(c.operation),
                permission: permission_name(c.permission_type),
                error: Some(error),
            }
        })
        .collect();
    Ok((out, failed))
}

/// DescribeAcls for each filter; the ACLs found, each once, sorted.
pub async fn list(client: &mut Client, flags: &AclFlags) -> Result<Vec<AclEntry>, CliError> {
    let mut out = Vec::new();
    for f in flags.filters(PatternType::Any) {
        let req = DescribeAclsRequest::default()
            .with_resource_type_filter(f.resource_type_filter)
            .with_resource_name_filter(f.resource_name_filter)
            .with_pattern_type_filter(f.pattern_type_filter)
            .with_principal_filter(f.principal_filter)
            .with_host_filter(f.host_filter)
            .with_operation(f.operation)
            .with_permission_type(f.permission_type);
        let (resp, _) = client.call(ANY, &req, 3).await?;
        if resp.error_code != 0 {
            return Err(CliError::kafka(
                "DescribeAcls",
                resp.error_code,
                resp.error_message.map(|m| m.to_string()),
            ));
        }
        for r in &resp.resources {
            for a in &r.acls {
                out.push(AclEntry {
                    principal: a.principal.to_string(),
                    host: a.host.to_string(),
                    resource_type: resource_type_name(r.resource_type),
                    resource_name: r.resource_name.to_string(),
                    pattern_type: pattern_name(r.pattern_type),
                    operation: operation_name(a.operation),
                    permission: permission_name(a.permission_type),
                    error: None,
                });
            }
        }
    }
    sort_dedup(&mut out);
    Ok(out)
}

fn sort_dedup(v: &mut Vec<AclEntry>) {
    let key = |a: &AclEntry| {
        (
            a.resource_type.clone(),
            a.resource_name.clone(),
            a.pattern_type.clone(),
            a.principal.clone(),
            a.host.clone(),
            a.operation.clone(),
            a.permission.clone(),
        )
    };
    v.sort_by_key(key);
    v.dedup_by(|a, b| key(a) == key(b));
}

/// DeleteAcls; the ACLs deleted (each with its result), and how many failed.
pub async fn delete(
    client: &mut Client,
    flags: &AclFlags,
) -> Result<(Vec<AclEntry>, usize), CliError> {
    if flags.principals().is_empty()
        && flags.resources().is_empty()
        && flags.operation.is_empty()
        && flags.host.is_empty()
    {
        return Err(CliError::Usage(
            "delete needs at least one flag (a principal, resource, operation or host): it would delete every ACL".into(),
        ));
    }
    let req = DeleteAclsRequest::default().with_filters(flags.filters(PatternType::Literal));
    let (resp, _) = client.call(ANY, &req, 3).await?;
    let mut failed = 0;
    let mut out = Vec::new();
    for r in &resp.filter_results {
        if r.error_code != 0 {
            return Err(CliError::kafka(
                "DeleteAcls",
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            ));
        }
        for m in &r.matching_acls {
            let error = ItemError::from_code(
                m.error_code,
                m.error_message.as_ref().map(|m| m.to_string()),
            );
            failed += usize::from(error.is_some());
            out.push(AclEntry {
                principal: m.principal.to_string(),
                host: m.host.to_string(),
                resource_type: resource_type_name(m.resource_type),
                resource_name: m.resource_name.to_string(),
                pattern_type: pattern_name(m.pattern_type),
                operation: operation_name(m.operation),
                permission: permission_name(m.permission_type),
                error: Some(error),
            });
        }
    }
    sort_dedup(&mut out);
    Ok((out, failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_two_principals_two_operations_one_topic_when_create_then_cross_product() {
        let f = AclFlags {
            allow_principal: vec!["alice".into()],
            deny_principal: vec!["User:bob".into()],
            operation: vec![Operation::Read, Operation::Write],
            topic: vec!["orders".into()],
            resource_pattern_type: Some(PatternType::Prefixed),
            ..Default::default()
        };
        let c = f.creations().unwrap();
        assert_eq!(c.len(), 4);
        assert!(c.iter().all(|a| a.host.as_str() == "*"
            && a.resource_type == 2
            && a.resource_pattern_type == 4));
        assert_eq!(
            c.iter()
                .map(|a| (a.principal.to_string(), a.permission_type, a.operation))
                .collect::<Vec<_>>(),
            vec![
                ("User:alice".into(), 3, 3),
                ("User:alice".into(), 3, 4),
                ("User:bob".into(), 2, 3),
                ("User:bob".into(), 2, 4)
            ]
        );
    }

    #[test]
    fn given_incomplete_or_filter_only_flags_when_create_then_usage_error() {
        let mut f = AclFlags {
            allow_principal: vec!["alice".into()],
            operation: vec![Operation::Read],
            ..Default::default()
        };
        assert!(matches!(f.creations(), Err(CliError::Usage(_))));
        f.cluster = true;
        assert_eq!(
            f.creations().unwrap()[0].resource_name.as_str(),
            CLUSTER_NAME
        );
        f.resource_pattern_type = Some(PatternType::Match);
        assert!(matches!(f.creations(), Err(CliError::Usage(_))));
        f.resource_pattern_type = None;
        f.operation = vec![Operation::Any];
        assert!(matches!(f.creations(), Err(CliError::Usage(_))));
    }

    #[test]
    fn given_no_flags_when_listing_then_one_filter_matching_everything() {
        let f = AclFlags::default().filters(PatternType::Any);
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!(
            (
                f.resource_type_filter,
                f.pattern_type_filter,
                f.operation,
                f.permission_type
            ),
            (1, 1, 1, 1)
        );
        assert!(f.resource_name_filter.is_none() && f.principal_filter.is_none());
        assert!(f.host_filter.is_none());
    }
}
