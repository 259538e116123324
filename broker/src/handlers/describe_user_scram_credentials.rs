//! DescribeUserScramCredentials (key 50): each user's SCRAM mechanisms and iteration counts
//! (never salts or keys), all users when none are named. Kafka's `ScramImage.describe`
//! answers: a user named twice gets DUPLICATE_RESOURCE, one without a credential
//! RESOURCE_NOT_FOUND, each with Kafka's message.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::security::acl::Operation;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 0;

pub async fn handle(
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    // Kafka's `handleDescribeUserScramCredentialsRequest`: DESCRIBE on the cluster, else the
    // request and every named user fail with CLUSTER_AUTHORIZATION_FAILED.
    if !ctx.access().allows_cluster(Operation::Describe) {
        let code = ResponseError::ClusterAuthorizationFailed.code();
        let msg = || {
            Some(StrBytes::from_static_str(
                super::errors::CLUSTER_AUTHORIZATION_FAILED,
            ))
        };
        let results = req
            .users
            .unwrap_or_default()
            .into_iter()
            .map(|_| {
                DescribeUserScramCredentialsResult::default()
                    .with_error_code(code)
                    .with_error_message(msg())
            })
            .collect();
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(code)
            .with_error_message(msg())
            .with_results(results);
    }
    let known = ctx.ctx().credentials.users();
    // user -> named more than once
    let mut wanted: BTreeMap<String, bool> = BTreeMap::new();
    match req.users.filter(|u| !u.is_empty()) {
        None => wanted.extend(known.keys().map(|u| (u.clone(), false))),
        Some(users) => {
            for u in users {
                let dup = wanted.contains_key(u.name.as_str());
                wanted.insert(u.name.to_string(), dup);
            }
        }
    }
    let results = wanted
        .into_iter()
        .map(|(user, dup)| {
            // Kafka's ApiError.NONE carries a null message.
            let r = DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user.clone()))
                .with_error_message(None);
            let fail = |code: ResponseError, msg: &str| {
                r.clone()
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(format!("{msg}: {user}"))))
            };
            if dup {
                return fail(
                    ResponseError::DuplicateResource,
                    "Cannot describe SCRAM credentials for the same user twice in a single request",
                );
            }
            match known.get(&user) {
                None => fail(
                    ResponseError::ResourceNotFound,
                    "Attempt to describe a user credential that does not exist",
                ),
                Some(mechs) => r.clone().with_credential_infos(
                    mechs
                        .iter()
                        .map(|(m, i)| {
                            CredentialInfo::default()
                                .with_mechanism(m.type_id())
                                .with_iterations(*i)
                        })
                        .collect(),
                ),
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default()
        .with_error_message(None)
        .with_results(results)
}
