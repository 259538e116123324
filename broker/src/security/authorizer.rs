//! Kafka's `StandardAuthorizer` decision over the ACLs of `metadata::acls`.
//!
//! Turned on by `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`
//! (Kafka's name); unset means no authorizer, and `Access::allows` is then a branch on `None`
//! with no principal lookup, so the PLAINTEXT default path pays nothing.
//!
//! The rules (`StandardAuthorizerData.authorize` / `findResult`):
//! - a principal in `super.users` (`User:a;User:b`) may do everything;
//! - the ACLs that apply to a resource are its LITERAL ones, the LITERAL `*` one and every
//!   PREFIXED one whose name starts the resource's name;
//! - one applies to a request if its principal is the request's or `User:*`, its host the
//!   client's IP or `*`, and its operation the one asked, ALL, or — for ALLOW only — one that
//!   implies it (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
//!   DESCRIBE_CONFIGS);
//! - a matching DENY wins over any ALLOW; no matching ALLOW denies;
//! - a resource with no ACL at all is allowed only with `allow.everyone.if.no.acl.found`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use super::acl::{AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD};
use super::Principal;
use crate::metadata::acls::AclStore;

/// Kafka's authorizer class name; the one value `authorizer.class.name` accepts.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// Kafka's `authorizedOperations` value when the client did not ask for them.
pub const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

pub struct Authorizer {
    store: Arc<dyn AclStore>,
    super_users: HashSet<String>,
    allow_everyone_if_no_acl_found: bool,
    /// The index of the store's last snapshot, rebuilt when the store hands out a new one.
    index: RwLock<(Arc<Vec<AclBinding>>, Arc<AclIndex>)>,
}

/// The ACLs by resource type: LITERAL ones by name (`*` among them), PREFIXED ones in a list,
/// so a check looks at the ACLs that can apply instead of all of them.
#[derive(Default)]
struct AclIndex {
    literal: HashMap<(ResourceType, String), Vec<AclBinding>>,
    prefixed: HashMap<ResourceType, Vec<AclBinding>>,
}

impl AclIndex {
    fn build(acls: &[AclBinding]) -> AclIndex {
        let mut ix = AclIndex::default();
        for a in acls {
            match a.pattern_type {
                PatternType::Literal => ix
                    .literal
                    .entry((a.resource_type, a.resource_name.clone()))
                    .or_default()
                    .push(a.clone()),
                PatternType::Prefixed => ix
                    .prefixed
                    .entry(a.resource_type)
                    .or_default()
                    .push(a.clone()),
                _ => {}
            }
        }
        ix
    }

    /// The ACLs whose pattern covers `rtype`/`name`.
    fn covering<'a>(
        &'a self,
        rtype: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> {
        let literal = |n: &str| {
            self.literal
                .get(&(rtype, n.to_string()))
                .into_iter()
                .flatten()
        };
        let wildcard = (name != WILDCARD).then(|| literal(WILDCARD));
        literal(name).chain(wildcard.into_iter().flatten()).chain(
            self.prefixed
                .get(&rtype)
                .into_iter()
                .flatten()
                .filter(move |a| a.covers(name)),
        )
    }
}

impl Authorizer {
    pub fn new(
        store: Arc<dyn AclStore>,
        super_users: &str,
        allow_everyone_if_no_acl_found: bool,
    ) -> Authorizer {
        Authorizer {
            store,
            super_users: parse_super_users(super_users),
            allow_everyone_if_no_acl_found,
            index: RwLock::new((Arc::new(Vec::new()), Arc::new(AclIndex::default()))),
        }
    }

    fn index(&self) -> Arc<AclIndex> {
        let acls = self.store.snapshot();
        {
            let cached = self.index.read().unwrap_or_else(|e| e.into_inner());
            if Arc::ptr_eq(&cached.0, &acls) {
                return cached.1.clone();
            }
        }
        let ix = Arc::new(AclIndex::build(&acls));
        *self.index.write().unwrap_or_else(|e| e.into_inner()) = (acls, ix.clone());
        ix
    }

    pub fn store(&self) -> &Arc<dyn AclStore> {
        &self.store
    }

    fn is_super(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// Whether `principal` (`User:alice`) connecting from `host` (an IP) may do `op` on the
    /// resource `rtype`/`name`.
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        rtype: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super(principal) {
            return true;
        }
        let wildcard = wildcard_principal(principal);
        let index = self.index();
        let mut found = false;
        let mut allowed = false;
        for acl in index.covering(rtype, name) {
            found = true;
            if acl.principal != principal && acl.principal != wildcard {
                continue;
            }
            if acl.host != WILDCARD && acl.host != host {
                continue;
            }
            match acl.permission {
                Permission::Deny if acl.operation == op || acl.operation == Operation::All => {
                    return false
                }
                Permission::Allow if acl.operation.allow_implies(op) => allowed = true,
                _ => {}
            }
        }
        allowed || (!found && self.allow_everyone_if_no_acl_found)
    }

    /// Kafka's `Authorizer.authorizeByResourceType`: whether `op` is allowed on at least one
    /// resource of `rtype` (InitProducerId without a transactional id asks WRITE on any
    /// topic). A literal `*` DENY denies; an ALLOW counts unless a DENY dominates it.
    pub fn authorize_by_resource_type(
        &self,
        principal: &str,
        host: &str,
        op: Operation,
        rtype: ResourceType,
    ) -> bool {
        // Kafka checks a made-up name first, so super users (and allow.everyone with no
        // ACLs on it) pass whatever DENY ACLs exist.
        if self.authorize(principal, host, op, rtype, "hardcode") {
            return true;
        }
        let wildcard = wildcard_principal(principal);
        let acls = self.store.snapshot();
        let applies = |a: &&AclBinding| {
            a.resource_type == rtype
                && (a.host == host || a.host == WILDCARD)
                && (a.principal == principal || a.principal == wildcard)
                && (a.operation == op || a.operation == Operation::All)
        };
        let mut deny_literal = HashSet::new();
        let mut deny_prefixed = HashSet::new();
        let mut allow = Vec::new();
        for a in acls.iter().filter(applies) {
            match (a.permission, a.pattern_type) {
                (Permission::Deny, PatternType::Literal) if a.resource_name == WILDCARD => {
                    return false
                }
                (Permission::Deny, PatternType::Literal) => {
                    deny_literal.insert(a.resource_name.as_str());
                }
                (Permission::Deny, PatternType::Prefixed) => {
                    deny_prefixed.insert(a.resource_name.as_str());
                }
                (Permission::Allow, PatternType::Literal) if a.resource_name == WILDCARD => {
                    return true
                }
                (Permission::Allow, p) => allow.push((p, a.resource_name.as_str())),
                _ => {}
            }
        }
        allow.iter().any(|(p, name)| {
            if *p == PatternType::Literal && deny_literal.contains(name) {
                return false;
            }
            !name
                .char_indices()
                .map(|(i, c)| &name[..i + c.len_utf8()])
                .any(|prefix| deny_prefixed.contains(prefix))
        })
    }

    /// The `include_*_authorized_operations` bit field: bit `code` set for each operation of
    /// the resource type that is allowed (Kafka's `Utils.to32BitField`).
    pub fn authorized_operations(
        &self,
        principal: &str,
        host: &str,
        rtype: ResourceType,
        name: &str,
    ) -> i32 {
        bit_field(
            Operation::supported(rtype)
                .iter()
                .filter(|op| self.authorize(principal, host, **op, rtype, name)),
        )
    }
}

/// All of a resource type's operations as a bit field (what Kafka reports with no
/// authorizer).
pub fn all_operations(rtype: ResourceType) -> i32 {
    bit_field(Operation::supported(rtype).iter())
}

fn bit_field<'a>(ops: impl Iterator<Item = &'a Operation>) -> i32 {
    ops.fold(0i32, |bits, op| bits | (1i32 << op.code()))
}

/// `User:*` for a `User:alice` (the wildcard of the principal's own type).
fn wildcard_principal(principal: &str) -> String {
    let kind = principal
        .split_once(':')
        .map_or(Principal::USER, |(k, _)| k);
    format!("{kind}:{WILDCARD}")
}

/// `super.users`: `;`-separated principals.
fn parse_super_users(s: &str) -> HashSet<String> {
    s.split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

/// A request's view of the authorizer: built once per request (one principal clone when an
/// authorizer is configured, nothing otherwise).
pub struct Access {
    inner: Option<(Arc<Authorizer>, String, String)>,
}

impl Access {
    /// No authorizer: everything is allowed.
    pub fn open() -> Access {
        Access { inner: None }
    }

    pub fn new(authorizer: &Option<Arc<Authorizer>>, session: &super::Session) -> Access {
        Access::for_principal(
            authorizer,
            &session.principal().to_string(),
            session.client_host.trim_start_matches('/'),
        )
    }

    /// For a caller that is not a Kafka connection (the admin port's HTTP APIs).
    pub fn for_principal(
        authorizer: &Option<Arc<Authorizer>>,
        principal: &str,
        host: &str,
    ) -> Access {
        Access {
            inner: authorizer
                .as_ref()
                .map(|a| (a.clone(), principal.to_string(), host.to_string())),
        }
    }

    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    pub fn allows(&self, op: Operation, rtype: ResourceType, name: &str) -> bool {
        match &self.inner {
            None => true,
            Some((a, p, h)) => a.authorize(p, h, op, rtype, name),
        }
    }

    pub fn allows_cluster(&self, op: Operation) -> bool {
        self.allows(op, ResourceType::Cluster, super::acl::CLUSTER_NAME)
    }

    pub fn allows_any(&self, op: Operation, rtype: ResourceType) -> bool {
        match &self.inner {
            None => true,
            Some((a, p, h)) => a.authorize_by_resource_type(p, h, op, rtype),
        }
    }

    /// `include_*_authorized_operations`: the bit field if `requested`, else Kafka's
    /// "not requested" value.
    pub fn operations(&self, requested: bool, rtype: ResourceType, name: &str) -> i32 {
        if !requested {
            return OPERATIONS_NOT_REQUESTED;
        }
        match &self.inner {
            None => all_operations(rtype),
            Some((a, p, h)) => a.authorized_operations(p, h, rtype, name),
        }
    }
}

#[cfg(test)]
#[path = "authorizer_tests.rs"]
mod tests;
