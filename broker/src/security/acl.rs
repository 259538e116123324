//! Kafka's ACL vocabulary (`org.apache.kafka.common.acl` / `.resource`): resource types,
//! pattern types, operations and permissions with their wire codes, an ACL binding and the
//! filters of DescribeAcls / DeleteAcls with Kafka's `ResourcePatternFilter` and
//! `AccessControlEntryFilter` matching. Pure data and matching; the decision is
//! `authorizer`'s, the storage `metadata::acls`'s.

use serde::{Deserialize, Serialize};

/// Kafka's `ResourcePattern.WILDCARD_RESOURCE` and `AclEntry.WILDCARD_HOST`.
pub const WILDCARD: &str = "*";
/// The only name the CLUSTER resource has (`Resource.CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";

macro_rules! wire_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $code:expr, $text:expr;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name { $($variant,)* }

        impl $name {
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant,)*];

            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code,)* }
            }

            /// Kafka's `fromCode`: an unknown code is UNKNOWN.
            pub fn from_code(code: i8) -> $name {
                match code { $($code => $name::$variant,)* _ => $name::Unknown }
            }

            /// The name Kafka's tools print and parse (`kafka-acls.sh`).
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }
        }
    };
}

wire_enum!(
    /// `org.apache.kafka.common.resource.ResourceType`.
    ResourceType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
);

wire_enum!(
    /// `org.apache.kafka.common.resource.PatternType`.
    PatternType {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Match = 2, "MATCH";
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
);

wire_enum!(
    /// `org.apache.kafka.common.acl.AclOperation`.
    Operation {
        Unknown = 0, "UNKNOWN";
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
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
        TwoPhaseCommit = 15, "TWO_PHASE_COMMIT";
    }
);

wire_enum!(
    /// `org.apache.kafka.common.acl.AclPermissionType`.
    Permission {
        Unknown = 0, "UNKNOWN";
        Any = 1, "ANY";
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
);

impl Operation {
    /// The operations an ALLOW of `self` also allows (Kafka's `StandardAuthorizerData`:
    /// READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
    /// DESCRIBE_CONFIGS). DENY implies nothing: a DENY of READ does not deny DESCRIBE.
    pub fn allow_implies(self, wanted: Operation) -> bool {
        self == Operation::All
            || self == wanted
            || match wanted {
                Operation::Describe => matches!(
                    self,
                    Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                ),
                Operation::DescribeConfigs => self == Operation::AlterConfigs,
                _ => false,
            }
    }

    /// The operations a resource type has (`AclEntry.supportedOperations`), reported by
    /// `include_*_authorized_operations` as a bit field.
    pub fn supported(t: ResourceType) -> &'static [Operation] {
        use Operation::*;
        match t {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            _ => &[],
        }
    }
}

/// One ACL (`AclBinding` = `ResourcePattern` + `AccessControlEntry`), as stored. The
/// principal is Kafka's `type:name` text (`User:alice`, `User:*`), the host an IP or `*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// Why an ACL cannot be created (Kafka answers each with INVALID_REQUEST).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    #[error("Invalid patternType {0}")]
    PatternType(&'static str),
    #[error("Invalid resourceType {0}")]
    ResourceType(&'static str),
    #[error("Invalid operation {0}")]
    Operation(&'static str),
    #[error("Invalid permissionType {0}")]
    Permission(&'static str),
    #[error("Invalid empty resource name specified.")]
    EmptyName,
    #[error("The only valid name for the CLUSTER resource is kafka-cluster")]
    ClusterName,
    #[error("Could not parse principal from `{0}` (no colon is present separating the principal type from the principal name)")]
    Principal(String),
}

impl AclBinding {
    /// Kafka's checks of a new ACL (`AclApis.handleCreateAcls` and
    /// `AclControlManager.validateNewAcl`).
    pub fn validate(&self) -> Result<(), AclError> {
        match self.resource_type {
            ResourceType::Unknown | ResourceType::Any => {
                return Err(AclError::ResourceType(self.resource_type.name()))
            }
            _ => {}
        }
        if !matches!(
            self.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return Err(AclError::PatternType(self.pattern_type.name()));
        }
        if matches!(self.operation, Operation::Unknown | Operation::Any) {
            return Err(AclError::Operation(self.operation.name()));
        }
        if !matches!(self.permission, Permission::Allow | Permission::Deny) {
            return Err(AclError::Permission(self.permission.name()));
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return Err(AclError::ClusterName);
        }
        if self.resource_name.is_empty() {
            return Err(AclError::EmptyName);
        }
        if !self.principal.contains(':') {
            return Err(AclError::Principal(self.principal.clone()));
        }
        Ok(())
    }

    /// Whether this ACL's pattern covers the resource `name` (the resource side of
    /// `StandardAuthorizerData`'s lookup: the literal name, the literal wildcard, a prefix).
    pub fn covers(&self, name: &str) -> bool {
        match self.pattern_type {
            PatternType::Literal => self.resource_name == name || self.resource_name == WILDCARD,
            PatternType::Prefixed => name.starts_with(self.resource_name.as_str()),
            _ => false,
        }
    }
}

/// A DescribeAcls / DeleteAcls filter (`AclBindingFilter`): `None` text fields match
/// anything, ANY enums match anything, MATCH patterns match what would apply to the name.
/// Serialisable: a cluster replicates DeleteAcls as its filters (`cluster::image`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclFilter {
    /// A filter with an UNKNOWN element matches nothing and is refused
    /// (`AclBindingFilter.isUnknown`; Kafka answers INVALID_REQUEST).
    pub fn is_unknown(&self) -> bool {
        self.resource_type == ResourceType::Unknown
            || self.pattern_type == PatternType::Unknown
            || self.operation == Operation::Unknown
            || self.permission == Permission::Unknown
    }

    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.matches_pattern(acl) && self.matches_entry(acl)
    }

    /// `ResourcePatternFilter.matches`.
    fn matches_pattern(&self, acl: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != acl.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == acl.pattern_type {
            return *name == acl.resource_name;
        }
        // MATCH: the ACLs that would apply to a resource called `name`.
        acl.covers(name)
    }

    /// `AccessControlEntryFilter.matches`.
    fn matches_entry(&self, acl: &AclBinding) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == Operation::Any || self.operation == acl.operation)
            && (self.permission == Permission::Any || self.permission == acl.permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(t: ResourceType, name: &str, p: PatternType) -> AclBinding {
        AclBinding {
            resource_type: t,
            resource_name: name.into(),
            pattern_type: p,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    fn filter(name: Option<&str>, p: PatternType) -> AclFilter {
        AclFilter {
            resource_type: ResourceType::Topic,
            resource_name: name.map(Into::into),
            pattern_type: p,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        }
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_are_unknown() {
        for o in Operation::ALL_VALUES {
            assert_eq!(Operation::from_code(o.code()), *o);
        }
        assert_eq!(Operation::from_code(99), Operation::Unknown);
        assert_eq!(ResourceType::from_code(-1), ResourceType::Unknown);
        assert_eq!(PatternType::Prefixed.code(), 4);
        assert_eq!(Permission::Allow.code(), 3);
        assert_eq!(ResourceType::TransactionalId.code(), 5);
    }

    #[test]
    fn filter_matching_follows_kafkas_resource_pattern_filter() {
        use PatternType::*;
        let lit = acl(ResourceType::Topic, "orders", Literal);
        let star = acl(ResourceType::Topic, "*", Literal);
        let pre = acl(ResourceType::Topic, "ord", Prefixed);
        let group = acl(ResourceType::Group, "orders", Literal);
        // (filter, acl, matches)
        let table = [
            (filter(None, Any), &lit, true),
            (filter(None, Any), &group, false),
            (filter(Some("orders"), Any), &lit, true),
            (filter(Some("orders"), Any), &star, false),
            (filter(Some("orders"), Any), &pre, false),
            (filter(Some("orders"), Literal), &lit, true),
            (filter(Some("orders"), Prefixed), &lit, false),
            (filter(Some("ord"), Prefixed), &pre, true),
            (filter(Some("orders"), Match), &lit, true),
            (filter(Some("orders"), Match), &star, true),
            (filter(Some("orders"), Match), &pre, true),
            (filter(Some("other"), Match), &pre, false),
            (filter(Some("*"), Literal), &star, true),
            (filter(None, Match), &pre, true),
        ];
        for (i, (f, a, want)) in table.iter().enumerate() {
            assert_eq!(f.matches(a), *want, "row {i}: {f:?} vs {a:?}");
        }
        let mut f = filter(None, Any);
        f.principal = Some("User:bob".into());
        assert!(!f.matches(&lit));
        f.principal = Some("User:alice".into());
        f.operation = Operation::Write;
        assert!(!f.matches(&lit));
    }

    #[test]
    fn validation_refuses_what_kafka_refuses() {
        use PatternType::*;
        assert_eq!(acl(ResourceType::Topic, "t", Literal).validate(), Ok(()));
        assert_eq!(
            acl(ResourceType::Topic, "t", Match).validate(),
            Err(AclError::PatternType("MATCH"))
        );
        assert_eq!(
            acl(ResourceType::Topic, "", Literal).validate(),
            Err(AclError::EmptyName)
        );
        assert_eq!(
            acl(ResourceType::Cluster, "c", Literal).validate(),
            Err(AclError::ClusterName)
        );
        assert_eq!(
            acl(ResourceType::Any, "t", Literal).validate(),
            Err(AclError::ResourceType("ANY"))
        );
        let mut a = acl(ResourceType::Topic, "t", Literal);
        a.operation = Operation::Any;
        assert_eq!(a.validate(), Err(AclError::Operation("ANY")));
        a.operation = Operation::Read;
        a.permission = Permission::Any;
        assert_eq!(a.validate(), Err(AclError::Permission("ANY")));
        a.permission = Permission::Deny;
        a.principal = "alice".into();
        assert!(matches!(a.validate(), Err(AclError::Principal(_))));
    }
}
