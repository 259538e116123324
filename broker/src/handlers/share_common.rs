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

#[cfg(test)]
mod tests {
    use super::*;
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
