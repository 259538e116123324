//! DescribeClientQuotas (key 48): the quota entities a filter matches, with their values
//! (KIP-546). Kafka's `ClientQuotasImage.describe`: each filter component names an entity
//! type and matches its EXACT name, its DEFAULT entity or any SPECIFIED one; `strict` asks
//! for entities with no other types. A bad filter fails the whole request (INVALID_REQUEST,
//! or UNSUPPORTED_VERSION for an unknown entity type) with Kafka's message; DESCRIBE_CONFIGS
//! on the cluster is needed, else CLUSTER_AUTHORIZATION_FAILED (Kafka's `KafkaApis`).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::metadata::quotas::{QuotaEntity, Quotas, CLIENT_ID, IP, USER};
use crate::security::acl::Operation;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 1;

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

pub async fn handle(
    ctx: &RequestContext,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    if !ctx.access().allows_cluster(Operation::DescribeConfigs) {
        return failure(
            ResponseError::ClusterAuthorizationFailed,
            super::errors::CLUSTER_AUTHORIZATION_FAILED.into(),
        );
    }
    match describe(
        &ctx.ctx().quotas.store().snapshot(),
        &req.components,
        req.strict,
    ) {
        Ok(entries) => DescribeClientQuotasResponse::default()
            .with_error_message(None)
            .with_entries(Some(entries)),
        Err((e, message)) => failure(e, message),
    }
}

fn failure(e: ResponseError, message: String) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default()
        .with_error_code(e.code())
        .with_error_message(Some(StrBytes::from_string(message)))
        .with_entries(None)
}

/// A filter: entity type -> the name it must have (`None`: the default entity), and the
/// types that must merely be present.
struct Filter {
    exact: BTreeMap<String, Option<String>>,
    present: BTreeSet<String>,
    strict: bool,
}

impl Filter {
    fn parse(
        components: &[ComponentData],
        strict: bool,
    ) -> Result<Filter, (ResponseError, String)> {
        let invalid = |m: String| (ResponseError::InvalidRequest, m);
        let mut f = Filter {
            exact: BTreeMap::new(),
            present: BTreeSet::new(),
            strict,
        };
        for c in components {
            let t = c.entity_type.as_str();
            if t.is_empty() {
                return Err(invalid("Invalid empty entity type.".into()));
            }
            if f.exact.contains_key(t) || f.present.contains(t) {
                return Err(invalid(format!(
                    "Entity type {t} cannot appear more than once in the filter."
                )));
            }
            if ![IP, USER, CLIENT_ID].contains(&t) {
                return Err((
                    ResponseError::UnsupportedVersion,
                    format!("Unsupported entity type {t}"),
                ));
            }
            let name = c._match.as_ref().map(|m| m.to_string());
            match c.match_type {
                MATCH_EXACT => {
                    let Some(name) = name else {
                        return Err(invalid(
                            "Request specified MATCH_TYPE_EXACT, but set match string to null."
                                .into(),
                        ));
                    };
                    f.exact.insert(t.to_string(), Some(name));
                }
                MATCH_DEFAULT if name.is_some() => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                            .into(),
                    ))
                }
                MATCH_DEFAULT => {
                    f.exact.insert(t.to_string(), None);
                }
                MATCH_SPECIFIED if name.is_some() => return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .into(),
                )),
                MATCH_SPECIFIED => {
                    f.present.insert(t.to_string());
                }
                other => return Err(invalid(format!("Unknown match type {other}"))),
            }
        }
        let has = |t: &str| f.exact.contains_key(t) || f.present.contains(t);
        if has(IP) && (has(USER) || has(CLIENT_ID)) {
            return Err(invalid(
                "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."
                    .into(),
            ));
        }
        Ok(f)
    }

    fn matches(&self, e: &QuotaEntity) -> bool {
        if self.strict && e.len() != self.exact.len() + self.present.len() {
            return false;
        }
        self.exact.iter().all(|(t, n)| e.get(t) == Some(n))
            && self.present.iter().all(|t| e.contains_key(t))
    }
}

/// The entries of `quotas` that `components` match (Kafka's `ClientQuotasImage.describe`).
pub fn describe(
    quotas: &Quotas,
    components: &[ComponentData],
    strict: bool,
) -> Result<Vec<EntryData>, (ResponseError, String)> {
    let filter = Filter::parse(components, strict)?;
    Ok(quotas
        .iter()
        .filter(|(e, _)| filter.matches(e))
        .map(|(e, values)| {
            EntryData::default()
                .with_entity(
                    e.iter()
                        .map(|(t, n)| {
                            EntityData::default()
                                .with_entity_type(StrBytes::from_string(t.clone()))
                                .with_entity_name(n.clone().map(StrBytes::from_string))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(k, v)| {
                            ValueData::default()
                                .with_key(StrBytes::from_string(k.clone()))
                                .with_value(*v)
                        })
                        .collect(),
                )
        })
        .collect())
}
