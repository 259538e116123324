//! Where a partition's replicas are, as Metadata and DescribeTopicPartitions both tell it:
//! one node is the leader of everything it has; clustered, the placement the metadata quorum
//! decided — replicas, ISR, and the replicas on fenced brokers or without the client's
//! listener as offline. A partition not yet in this node's image, or whose ISR is all fenced,
//! has no leader (LEADER_NOT_AVAILABLE, as Kafka answers); nor has one whose leader lacks the
//! listener the request came in on (LISTENER_NOT_FOUND, Kafka's `getPartitionMetadata`).

use kafka_protocol::error::ResponseError;

use crate::cluster::image::MetadataImage;
use crate::shard::{BrokerContext, LEADER_EPOCH};

/// One partition's placement.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline: Vec<i32>,
    /// 0, or LEADER_NOT_AVAILABLE.
    pub error_code: i16,
}

/// The placements of `topic`'s partitions in `range`, for a client of `listener`.
pub fn placements(
    ctx: &BrokerContext,
    topic: &str,
    range: std::ops::Range<i32>,
    listener: &str,
) -> Vec<(i32, Placement)> {
    let image = ctx.cluster.get().map(|c| c.image());
    let node = ctx.config.node_id;
    range
        .map(|p| {
            let placement = match &image {
                None => Placement {
                    leader: node,
                    leader_epoch: LEADER_EPOCH,
                    replicas: vec![node],
                    isr: vec![node],
                    offline: Vec::new(),
                    error_code: 0,
                },
                Some(image) => clustered(image, topic, p, listener),
            };
            (p, placement)
        })
        .collect()
}

fn clustered(image: &MetadataImage, topic: &str, partition: i32, listener: &str) -> Placement {
    let Some(r) = image.partition(topic, partition) else {
        return Placement {
            leader: -1,
            leader_epoch: 0,
            replicas: Vec::new(),
            isr: Vec::new(),
            offline: Vec::new(),
            error_code: ResponseError::LeaderNotAvailable.code(),
        };
    };
    let unreachable = |b: &i32| {
        image.node_on(*b, listener).is_none() || (r.replicated() && image.fenced.contains(b))
    };
    let offline = r.replicas.iter().copied().filter(unreachable).collect();
    let (leader, error_code) = if r.leader < 0 || !image.brokers.contains_key(&r.leader) {
        (-1, ResponseError::LeaderNotAvailable.code())
    } else if image.node_on(r.leader, listener).is_none() {
        (-1, ResponseError::ListenerNotFound.code())
    } else {
        (r.leader, 0)
    };
    Placement {
        leader,
        leader_epoch: r.leader_epoch,
        replicas: r.replicas.clone(),
        isr: r.in_sync(),
        offline,
        error_code,
    }
}
