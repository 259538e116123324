//! What the share group handlers (`share_*.rs`, `describe_share_group_offsets.rs`) have in
//! common: the one mapping of `ShareError` to Kafka's codes, the gate Kafka 4.4 puts in
//! front of them (`share.version` >= 1, else UNSUPPORTED_VERSION), and the checks of a
//! member's request that ShareFetch and ShareAcknowledge share.

use kafka_protocol::error::ResponseError;

use kafka_protocol::protocol::StrBytes;

use crate::coordinator::share::ShareError;
use crate::metadata::features::SHARE_VERSION;
use crate::security::acl::{Operation, ResourceType};

/// The one place share-group failures become Kafka error codes.
pub fn share_code(e: &ShareError) -> i16 {
    match e {
        ShareError::Coordinator(g) => return super::errors::group_code(g),
        ShareError::CoordinatorNotAvailable(_) => ResponseError::CoordinatorNotAvailable,
        ShareError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        ShareError::UnknownMemberId => ResponseError::UnknownMemberId,
        ShareError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        ShareError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        ShareError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        ShareError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        ShareError::InvalidRequest(_) => ResponseError::InvalidRequest,
        ShareError::ShareSessionNotFound => ResponseError::ShareSessionNotFound,
        ShareError::InvalidShareSessionEpoch => ResponseError::InvalidShareSessionEpoch,
        ShareError::InvalidRecordState(_) => ResponseError::InvalidRecordState,
    }
    .code()
}

/// Kafka's `isShareGroupProtocolEnabled`: share groups answer only with `share.version` >= 1.
pub fn enabled(ctx: &super::RequestContext) -> bool {
    ctx.ctx().features.snapshot().level(SHARE_VERSION) >= 1
}

/// A member's ShareFetch or ShareAcknowledge admitted: share groups on, group and member
/// ids given and not empty, READ on the group (Kafka's `handleShareFetchRequest` order).
/// `Ok((group, member))`, or the whole request's error code and message.
pub fn admit_member(
    ctx: &super::RequestContext,
    group_id: Option<&StrBytes>,
    member_id: Option<&StrBytes>,
) -> Result<(String, String), (i16, String)> {
    if !enabled(ctx) {
        let code = ResponseError::UnsupportedVersion.code();
        return Err((code, "share groups are disabled".into()));
    }
    let (Some(group), Some(member)) = (group_id, member_id) else {
        let code = ResponseError::InvalidRequest.code();
        return Err((code, "GroupId and MemberId are required".into()));
    };
    if group.is_empty() || member.is_empty() {
        let code = ResponseError::InvalidRequest.code();
        return Err((code, "GroupId and MemberId are required".into()));
    }
    if !ctx
        .access()
        .allows(Operation::Read, ResourceType::Group, group)
    {
        return Err((
            ResponseError::GroupAuthorizationFailed.code(),
            String::new(),
        ));
    }
    Ok((group.to_string(), member.to_string()))
}

/// The acknowledge type that renews a lock (KIP-1222), served from ShareFetch and
/// ShareAcknowledge v2.
pub const RENEW: i8 = 4;

/// Kafka's `validateAcknowledgementBatches` for one partition's batches `(first, last, types)`:
/// ordered and not overlapping, one type or one per offset, types known at the request's
/// `version`, and RENEW only when the request says `IsRenewAck`. Any failure refuses the
/// partition's acknowledgements whole with INVALID_REQUEST.
pub fn check_batches(
    batches: &[(i64, i64, Vec<i8>)],
    version: i16,
    is_renew_ack: bool,
) -> Result<(), ShareError> {
    let max_type = if version >= 2 { RENEW } else { 3 };
    let mut previous_last = -1;
    for (first, last, types) in batches {
        let problem = if first > last {
            Some(format!("first offset {first} is after last offset {last}"))
        } else if *first < previous_last {
            Some(format!("batch at {first} overlaps the one before it"))
        } else if types.is_empty() {
            Some("a batch without acknowledge types".to_string())
        } else if types.len() > 1 && (last - first) as usize != types.len() - 1 {
            Some(format!(
                "{} acknowledge types for offsets {first}..={last}",
                types.len()
            ))
        } else if let Some(t) = types.iter().find(|t| !(0..=max_type).contains(*t)) {
            Some(format!(
                "acknowledge type {t} is not valid at version {version}"
            ))
        } else if !is_renew_ack && types.contains(&RENEW) {
            Some("RENEW acknowledgements need IsRenewAck".to_string())
        } else {
            None
        };
        if let Some(m) = problem {
            return Err(ShareError::InvalidRequest(m));
        }
        previous_last = *last;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_acknowledgement_batches_when_checked_then_kafka_rules_hold() {
        let ok = |b: &[(i64, i64, Vec<i8>)], v, renew| check_batches(b, v, renew).is_ok();
        assert!(ok(&[(0, 2, vec![1]), (3, 4, vec![1, 2])], 1, false));
        assert!(!ok(&[(3, 2, vec![1])], 1, false), "first after last");
        assert!(
            !ok(&[(0, 5, vec![1]), (4, 6, vec![1])], 1, false),
            "overlap"
        );
        assert!(!ok(&[(0, 1, vec![])], 1, false), "no types");
        assert!(
            !ok(&[(0, 3, vec![1, 1])], 1, false),
            "types do not match offsets"
        );
        assert!(!ok(&[(0, 0, vec![4])], 1, true), "RENEW is v2+");
        assert!(!ok(&[(0, 0, vec![4])], 2, false), "RENEW needs IsRenewAck");
        assert!(ok(&[(0, 0, vec![4])], 2, true));
        assert!(!ok(&[(0, 0, vec![5])], 2, true), "unknown type");
        assert!(!ok(&[(0, 0, vec![-1])], 2, true), "negative type");
    }
    use crate::coordinator::group::GroupError;

    #[test]
    fn given_each_share_error_when_mapped_then_kafka_code() {
        let table = [
            (ShareError::CoordinatorNotAvailable(String::new()), 15),
            (ShareError::UnknownTopicOrPartition, 3),
            (ShareError::UnknownMemberId, 25),
            (ShareError::FencedMemberEpoch, 110),
            (ShareError::InconsistentGroupProtocol, 23),
            (ShareError::GroupIdNotFound, 69),
            (ShareError::NonEmptyGroup, 68),
            (ShareError::InvalidRequest(String::new()), 42),
            (ShareError::ShareSessionNotFound, 122),
            (ShareError::InvalidShareSessionEpoch, 123),
            (ShareError::InvalidRecordState(String::new()), 121),
            (ShareError::Coordinator(GroupError::NotCoordinator), 16),
        ];
        for (e, code) in table {
            assert_eq!(share_code(&e), code, "{e:?}");
        }
    }
}
