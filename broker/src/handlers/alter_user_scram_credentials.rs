//! AlterUserScramCredentials (key 51): upsert and delete SCRAM credentials, what
//! `kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users`
//! sends. The client sends the salted password (PBKDF2 done on its side); the store keeps
//! StoredKey and ServerKey only. Kafka's `ScramControlManager` rules: one change per user per
//! request (DUPLICATE_RESOURCE), a non-empty name, a known mechanism
//! (UNSUPPORTED_SASL_MECHANISM), 4096..=16384 iterations (UNACCEPTABLE_CREDENTIAL), deleting
//! only what exists (RESOURCE_NOT_FOUND). The accepted changes are persisted together before
//! the answer and apply at once on every shard — on a cluster through the metadata quorum,
//! answered once this node has them (the other nodes follow as they apply the entry).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::cluster::image::Command;
use crate::metadata::scram::{CredentialChange, ScramMechanism};
use crate::security::acl::Operation;
use crate::security::scram::credential_from_salted;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

type Refusal = (ResponseError, String);

fn check_name_and_mechanism(name: &str, mechanism: i8) -> Result<ScramMechanism, Refusal> {
    if name.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty".into(),
        ));
    }
    ScramMechanism::from_type(mechanism).ok_or((
        ResponseError::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism".into(),
    ))
}

pub async fn handle(
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // Kafka's `ControllerApis.handleAlterUserScramCredentials`: ALTER on the cluster, else
    // every user named fails with CLUSTER_AUTHORIZATION_FAILED (sorted, once each).
    if !ctx.access().allows_cluster(Operation::Alter) {
        let users: std::collections::BTreeSet<String> = req
            .deletions
            .iter()
            .map(|d| d.name.to_string())
            .chain(req.upsertions.iter().map(|u| u.name.to_string()))
            .collect();
        let results = users
            .into_iter()
            .map(|u| {
                AlterUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(u))
                    .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        super::errors::CLUSTER_AUTHORIZATION_FAILED,
                    )))
            })
            .collect();
        return AlterUserScramCredentialsResponse::default().with_results(results);
    }
    let store = &ctx.ctx().credentials;
    let mut changes: BTreeMap<String, CredentialChange> = BTreeMap::new();
    let mut errors: BTreeMap<String, Refusal> = BTreeMap::new();
    let twice = || {
        (
            ResponseError::DuplicateResource,
            "A user credential cannot be altered twice in the same request".to_string(),
        )
    };
    for d in &req.deletions {
        let user = d.name.to_string();
        if errors.contains_key(&user) {
            continue;
        }
        if changes.remove(&user).is_some() {
            errors.insert(user, twice());
            continue;
        }
        let checked = check_name_and_mechanism(&user, d.mechanism).and_then(|m| {
            store.credential(&user, m).map(|_| m).ok_or((
                ResponseError::ResourceNotFound,
                "Attempt to delete a user credential that does not exist".into(),
            ))
        });
        match checked {
            Ok(mechanism) => {
                changes.insert(user.clone(), CredentialChange::Delete { user, mechanism });
            }
            Err(e) => {
                errors.insert(user, e);
            }
        }
    }
    for u in &req.upsertions {
        let user = u.name.to_string();
        if errors.contains_key(&user) {
            continue;
        }
        if changes.remove(&user).is_some() {
            errors.insert(user, twice());
            continue;
        }
        let checked = check_name_and_mechanism(&user, u.mechanism).and_then(|m| {
            if u.iterations < ScramMechanism::MIN_ITERATIONS {
                Err((
                    ResponseError::UnacceptableCredential,
                    "Too few iterations".into(),
                ))
            } else if u.iterations > ScramMechanism::MAX_ITERATIONS {
                Err((
                    ResponseError::UnacceptableCredential,
                    "Too many iterations".into(),
                ))
            } else {
                Ok(m)
            }
        });
        match checked {
            Ok(mechanism) => {
                let credential = credential_from_salted(
                    mechanism,
                    &u.salted_password,
                    u.salt.to_vec(),
                    u.iterations,
                );
                changes.insert(
                    user.clone(),
                    CredentialChange::Upsert {
                        user,
                        mechanism,
                        credential,
                    },
                );
            }
            Err(e) => {
                errors.insert(user, e);
            }
        }
    }
    let batch: Vec<CredentialChange> = changes.values().cloned().collect();
    let stored = match ctx.ctx().cluster.get() {
        Some(_) if batch.is_empty() => Ok(()),
        Some(cluster) => cluster
            .propose(Command::AlterCredentials { changes: batch })
            .await
            .map(|_| ())
            .map_err(|e| (super::errors::cluster_write_code(&e), e.to_string())),
        None => store
            .apply(&batch)
            .map_err(|e| (ResponseError::UnknownServerError, e.to_string())),
    };
    if let Err((code, e)) = stored {
        tracing::error!(error = %e, "persisting SCRAM credentials failed");
        for user in changes.into_keys() {
            errors.insert(user, (code, e.clone()));
        }
        changes = BTreeMap::new();
    }
    let mut results: Vec<AlterUserScramCredentialsResult> = changes
        .into_keys()
        .map(|user| {
            // Kafka's ApiError.NONE carries a null message.
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user))
                .with_error_message(None)
        })
        .collect();
    results.extend(errors.into_iter().map(|(user, (code, msg))| {
        AlterUserScramCredentialsResult::default()
            .with_user(StrBytes::from_string(user))
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(msg)))
    }));
    AlterUserScramCredentialsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::StrBytes;

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(name.into()))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(bytes::Bytes::from_static(b"salt"))
            .with_salted_password(bytes::Bytes::from_static(&[7; 64]))
    }

    fn codes(r: &AlterUserScramCredentialsResponse) -> Vec<(String, i16, Option<String>)> {
        let mut v: Vec<_> = r
            .results
            .iter()
            .map(|x| {
                (
                    x.user.to_string(),
                    x.error_code,
                    x.error_message.as_ref().map(|m| m.to_string()),
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn given_alterations_when_applied_then_kafkas_codes_and_describe_shows_the_rest() {
        let h = Harness::new();
        let req = AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![
                upsert("alice", 2, 4096),
                upsert("bob", 1, 1024),
                upsert("carol", 1, 20000),
                upsert("dave", 3, 4096),
                upsert("", 1, 4096),
                upsert("erin", 1, 4096),
                upsert("erin", 2, 4096),
            ])
            .with_deletions(vec![ScramCredentialDeletion::default()
                .with_name(StrBytes::from_static_str("frank"))
                .with_mechanism(1)]);
        let r: AlterUserScramCredentialsResponse =
            h.call(ApiKey::AlterUserScramCredentials, 0, req);
        let s = |x: &str| Some(x.to_string());
        assert_eq!(
            codes(&r),
            vec![
                ("".into(), 93, s("Username must not be empty")),
                ("alice".into(), 0, None),
                ("bob".into(), 93, s("Too few iterations")),
                ("carol".into(), 93, s("Too many iterations")),
                ("dave".into(), 33, s("Unknown SCRAM mechanism")),
                (
                    "erin".into(),
                    92,
                    s("A user credential cannot be altered twice in the same request")
                ),
                (
                    "frank".into(),
                    91,
                    s("Attempt to delete a user credential that does not exist")
                ),
            ]
        );
        let d: DescribeUserScramCredentialsResponse = h.call(
            ApiKey::DescribeUserScramCredentials,
            0,
            DescribeUserScramCredentialsRequest::default().with_users(None),
        );
        assert_eq!(d.results.len(), 1);
        assert_eq!(d.results[0].user.as_str(), "alice");
        assert_eq!(d.results[0].credential_infos[0].mechanism, 2);
        assert_eq!(d.results[0].credential_infos[0].iterations, 4096);
        let name = |n: &str| UserName::default().with_name(StrBytes::from_string(n.into()));
        let d: DescribeUserScramCredentialsResponse = h.call(
            ApiKey::DescribeUserScramCredentials,
            0,
            DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                name("alice"),
                name("nobody"),
                name("alice"),
            ])),
        );
        let got: Vec<_> = d
            .results
            .iter()
            .map(|x| (x.user.to_string(), x.error_code))
            .collect();
        assert_eq!(got, vec![("alice".into(), 92), ("nobody".into(), 91)]);
        assert_eq!(
            d.results[1].error_message.as_deref(),
            Some("Attempt to describe a user credential that does not exist: nobody")
        );
    }
}
