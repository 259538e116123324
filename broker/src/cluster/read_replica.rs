//! KIP-392, fetch from the closest replica, on the metadata image's side: which partitions a
//! node serves to consumers as a follower, and which replicas of a partition it leads sit in
//! a consumer's rack. The pick among those (in sync, holding the offset, most caught up) is
//! the leader's, on the partition's home shard (`Partition::preferred_read_replica`), where
//! the followers' progress is.
//!
//! Kafka's rules: a consumer's Fetch from v11 on (which carries `rack_id`) may be served by
//! any replica, a follower reading up to its own high watermark (`fetchOnlyFromLeader` is
//! false for it); an older one, and every follower's fetch, by the leader only. The leader
//! names a `preferred_read_replica` only when `replica.selector.class` is the rack-aware
//! selector, the client named a rack, the leader is not in it, and a replica is.

use super::image::MetadataImage;
use crate::shard::BrokerContext;

/// Whether this node is a follower replica of the partition (clustered, in its replicas, not
/// its leader): a consumer's Fetch v11+ may read it here.
pub fn serves_as_follower(ctx: &BrokerContext, topic: &str, partition: i32) -> bool {
    let Some(c) = ctx.cluster.get() else {
        return false;
    };
    let image = c.image();
    image
        .partition(topic, partition)
        .is_some_and(|p| p.leader != c.node_id && p.replicas.contains(&c.node_id))
}

/// The replicas a consumer in `client_rack` could read `topic`-`partition` from instead of
/// this node, its leader; empty when it should read here (no rack-aware selector, no rack,
/// this node not the leader or in the client's rack itself).
pub fn rack_candidates(
    ctx: &BrokerContext,
    topic: &str,
    partition: i32,
    client_rack: &str,
    listener: &str,
) -> Vec<i32> {
    if client_rack.is_empty() || !ctx.config.rack_aware_fetch() {
        return Vec::new();
    }
    let Some(c) = ctx.cluster.get() else {
        return Vec::new();
    };
    candidates(
        &c.image(),
        c.node_id,
        topic,
        partition,
        client_rack,
        listener,
    )
}

fn candidates(
    image: &MetadataImage,
    me: i32,
    topic: &str,
    partition: i32,
    client_rack: &str,
    listener: &str,
) -> Vec<i32> {
    let Some(p) = image.partition(topic, partition) else {
        return Vec::new();
    };
    let rack_of = |id: &i32| image.brokers.get(id).and_then(|b| b.rack.as_deref());
    // The leader in the client's rack keeps it (Kafka's selector returns the leader first).
    if p.leader != me || rack_of(&me) == Some(client_rack) {
        return Vec::new();
    }
    p.replicas
        .iter()
        .copied()
        .filter(|r| *r != me && rack_of(r) == Some(client_rack))
        // A client can reach it only on the listener it came in on (Kafka drops a replica
        // without that endpoint), and a fenced broker serves nobody.
        .filter(|r| image.node_on(*r, listener).is_some() && !image.fenced.contains(r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::{BrokerRecord, Endpoint, PartitionRecord, TopicRecord};

    fn image() -> MetadataImage {
        let mut image = MetadataImage::default();
        for (id, rack) in [(1, "a"), (2, "b"), (3, "c"), (4, "b")] {
            let ep = Endpoint {
                listener: "PLAINTEXT".into(),
                host: "h".into(),
                port: 9092,
                protocol: "PLAINTEXT".into(),
            };
            image
                .brokers
                .insert(id, BrokerRecord::new(id, Some(rack.into()), vec![ep]));
        }
        image.topics.insert(
            "t".into(),
            TopicRecord {
                id: uuid::Uuid::nil(),
                configs: Default::default(),
                internal: false,
                partitions: vec![PartitionRecord {
                    leader: 1,
                    leader_epoch: 0,
                    replicas: vec![1, 2, 3, 4],
                    isr: vec![1, 2, 3, 4],
                    adding: Vec::new(),
                    removing: Vec::new(),
                }],
            },
        );
        image
    }

    #[test]
    fn given_a_client_in_another_rack_when_the_leader_selects_then_the_replicas_of_that_rack() {
        let mut image = image();
        assert_eq!(candidates(&image, 1, "t", 0, "b", "PLAINTEXT"), vec![2, 4]);
        assert_eq!(candidates(&image, 1, "t", 0, "c", "PLAINTEXT"), vec![3]);
        // The client's rack is the leader's, or has no replica: read from the leader.
        assert!(candidates(&image, 1, "t", 0, "a", "PLAINTEXT").is_empty());
        assert!(candidates(&image, 1, "t", 0, "z", "PLAINTEXT").is_empty());
        // Not the leader, an unknown partition, another listener: nothing to select.
        assert!(candidates(&image, 2, "t", 0, "b", "PLAINTEXT").is_empty());
        assert!(candidates(&image, 1, "t", 1, "b", "PLAINTEXT").is_empty());
        assert!(candidates(&image, 1, "t", 0, "b", "SSL").is_empty());
        // A fenced broker is left out.
        image.fenced.insert(2);
        assert_eq!(candidates(&image, 1, "t", 0, "b", "PLAINTEXT"), vec![4]);
    }
}
