//! AlterClientQuotas (key 49): sets and removes quota values of user / client-id / ip
//! entities (KIP-546), what `kafka-configs.sh --alter --entity-type users|clients` sends.
//! Kafka's `ClientQuotaControlManager.alterClientQuotas`: every entity is checked on its own
//! (types, names, keys, values) and answered with its own error; the valid ones are applied
//! together, persisted before the answer, and enforced from the next request on every shard
//! (on a cluster: through the metadata quorum, answered once this node has them; every node
//! enforces them as it applies the entry).
//! `validate_only` checks and applies nothing. ALTER_CONFIGS on the cluster is needed, else
//! every entity is CLUSTER_AUTHORIZATION_FAILED (Kafka's `ControllerApis`).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::EntryData as RequestEntry;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::cluster::image::Command;
use crate::metadata::quotas::{self as q, QuotaAlteration, QuotaEntity, Quotas};
use crate::security::acl::Operation;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 1;

/// Kafka's `ConfigDef` type of each quota key, which decides what a value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyType {
    Long,
    Int,
    Double,
}

const USER_AND_CLIENT_KEYS: &[(&str, KeyType)] = &[
    (q::PRODUCER_BYTE_RATE, KeyType::Long),
    (q::CONSUMER_BYTE_RATE, KeyType::Long),
    (q::REQUEST_PERCENTAGE, KeyType::Double),
    (q::CONTROLLER_MUTATION_RATE, KeyType::Double),
];

const IP_KEYS: &[(&str, KeyType)] = &[(q::CONNECTION_CREATION_RATE, KeyType::Int)];

pub async fn handle(
    ctx: &RequestContext,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let store = ctx.ctx().quotas.store();
    if !ctx.access().allows_cluster(Operation::AlterConfigs) {
        let entries = req
            .entries
            .iter()
            .map(|e| {
                answer(
                    &entity_of(e),
                    Some((
                        ResponseError::ClusterAuthorizationFailed,
                        super::errors::CLUSTER_AUTHORIZATION_FAILED.to_string(),
                    )),
                )
            })
            .collect();
        return AlterClientQuotasResponse::default().with_entries(entries);
    }
    let (results, changes) = plan(&store.snapshot(), &req.entries);
    if !req.validate_only && !changes.is_empty() {
        let entities = changes.len();
        let stored = match ctx.ctx().cluster.get() {
            Some(cluster) => cluster
                .propose(Command::AlterQuotas { changes })
                .await
                .map(|_| ())
                .map_err(|e| (super::errors::cluster_write_code(&e), e.to_string())),
            None => store
                .alter(&changes)
                .map_err(|e| (ResponseError::UnknownServerError, e.to_string())),
        };
        if let Err((code, e)) = stored {
            tracing::error!(error = %e, "persisting client quotas failed");
            let entries = results
                .iter()
                .map(|(entity, _)| answer(entity, Some((code, e.clone()))))
                .collect();
            return AlterClientQuotasResponse::default().with_entries(entries);
        }
        tracing::info!(entities, "client quotas altered");
    }
    AlterClientQuotasResponse::default().with_entries(
        results
            .iter()
            .map(|(entity, error)| answer(entity, error.clone()))
            .collect(),
    )
}

type Outcome = Option<(ResponseError, String)>;
/// An entity and its outcome; an entity and the change to apply to it.
type Answered = (QuotaEntity, Outcome);
type Change = (QuotaEntity, QuotaAlteration);

/// The request's entity as Kafka's `ClientQuotaEntity` builds it: a map, so a type named
/// twice keeps its last name.
fn entity_of(e: &RequestEntry) -> QuotaEntity {
    e.entity
        .iter()
        .map(|d| {
            (
                d.entity_type.to_string(),
                d.entity_name.as_ref().map(|n| n.to_string()),
            )
        })
        .collect()
}

fn answer(entity: &QuotaEntity, error: Outcome) -> EntryData {
    let (code, message) = match error {
        None => (0, None),
        Some((e, m)) => (e.code(), Some(StrBytes::from_string(m))),
    };
    EntryData::default()
        .with_error_code(code)
        .with_error_message(message)
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(StrBytes::from_string(t.clone()))
                        .with_entity_name(n.clone().map(StrBytes::from_string))
                })
                .collect(),
        )
}

/// Kafka's `ClientQuotaEntity.toString`, as its messages show an entity.
fn shown(e: &QuotaEntity) -> String {
    let parts: Vec<String> = e
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", parts.join(", "))
}

/// Each distinct entity's outcome, in request order, and the changes to apply. An entity
/// named twice is refused ("Ignoring duplicate entity"), but — as in Kafka, whose result map
/// keeps one answer per entity — its first alteration still applies when it was valid.
pub fn plan(current: &Quotas, entries: &[RequestEntry]) -> (Vec<Answered>, Vec<Change>) {
    let mut results: Vec<Answered> = Vec::new();
    let mut changes = Vec::new();
    for e in entries {
        let entity = entity_of(e);
        let invalid = |m: String| Some((ResponseError::InvalidRequest, m));
        let mut ops: BTreeMap<String, Option<f64>> = BTreeMap::new();
        let mut duplicate_key = false;
        for op in &e.ops {
            let value = (!op.remove).then_some(op.value);
            if ops.insert(op.key.to_string(), value).is_some() {
                duplicate_key = true;
            }
        }
        let order: Vec<(String, Option<f64>)> = e
            .ops
            .iter()
            .map(|op| (op.key.to_string(), (!op.remove).then_some(op.value)))
            .collect();
        let seen = results.iter().position(|(x, _)| *x == entity);
        if duplicate_key || seen.is_some() {
            let refusal = invalid(format!("Ignoring duplicate entity {}", shown(&entity)));
            match seen {
                Some(i) => results[i].1 = refusal,
                None => results.push((entity, refusal)),
            }
            continue;
        }
        match check(&entity, &order, current.get(&entity)) {
            Ok(alteration) => {
                if !alteration.is_empty() {
                    changes.push((entity.clone(), alteration));
                }
                results.push((entity, None));
            }
            Err(m) => results.push((entity, invalid(m))),
        }
    }
    (results, changes)
}

/// One entity's alteration, validated as Kafka's `alterClientQuotaEntity` does; only what
/// changes is kept.
fn check(
    entity: &QuotaEntity,
    ops: &[(String, Option<f64>)],
    current: Option<&q::QuotaValues>,
) -> Result<QuotaAlteration, String> {
    if entity.is_empty() {
        return Err("Invalid empty client quota entity".into());
    }
    for (t, n) in entity {
        if ![q::USER, q::CLIENT_ID, q::IP].contains(&t.as_str()) {
            return Err(format!("Unhandled client quota entity type: {t}"));
        }
        if n.as_deref() == Some("") {
            return Err(format!("Empty {t} not supported"));
        }
    }
    let keys = if let Some(ip) = entity.get(q::IP) {
        if entity.len() > 1 {
            // Kafka's message, its missing space included.
            return Err("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId".into());
        }
        if let Some(ip) = ip {
            if !resolvable(ip) {
                return Err(format!("{ip} is not a valid IP or resolvable host."));
            }
        }
        IP_KEYS
    } else {
        USER_AND_CLIENT_KEYS
    };
    let mut out = QuotaAlteration::new();
    for (key, value) in ops {
        let existing = current.and_then(|c| c.get(key)).copied();
        match value {
            None => {
                if existing.is_some() {
                    out.insert(key.clone(), None);
                }
            }
            Some(v) => {
                let Some((_, kind)) = keys.iter().find(|(k, _)| k == key) else {
                    return Err(format!("Invalid configuration key {key}"));
                };
                validate_value(key, *kind, *v)?;
                if existing != Some(*v) {
                    out.insert(key.clone(), Some(*v));
                }
            }
        }
    }
    Ok(out)
}

/// Kafka's `validateQuotaKeyValue`.
fn validate_value(key: &str, kind: KeyType, v: f64) -> Result<(), String> {
    if v <= 0.0 || v.is_nan() {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    // Kafka stores an infinite DOUBLE; JSON (the quota file, the cluster's metadata log) has
    // no infinity, so Strom refuses one rather than write what it could not read back.
    if v.is_infinite() {
        return Err(format!("Quota {key} must be a finite number"));
    }
    match kind {
        KeyType::Double => return Ok(()),
        KeyType::Int if v > i32::MAX as f64 => {
            return Err(format!("Proposed value for {key} is too large for an INT."))
        }
        KeyType::Long if v > i64::MAX as f64 => {
            return Err(format!("Proposed value for {key} is too large for a LONG."))
        }
        _ => {}
    }
    if (v % 1.0).abs() > 1e-6 {
        return Err(format!("{key} cannot be a fractional value."));
    }
    Ok(())
}

/// Java's `InetAddress.getByName` succeeds: an address, or a name the resolver knows.
fn resolvable(host: &str) -> bool {
    use std::net::ToSocketAddrs;
    host.parse::<std::net::IpAddr>().is_ok()
        || (host, 0)
            .to_socket_addrs()
            .is_ok_and(|mut a| a.next().is_some())
}

#[cfg(test)]
mod tests;
