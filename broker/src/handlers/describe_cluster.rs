//! DescribeCluster (key 60): the registered brokers (this node alone when not clustered) and
//! the controller.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;

pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 2;

/// No check (Kafka's `handleDescribeCluster`); `include_cluster_authorized_operations` fills
/// in what the client may do on the cluster.
pub async fn handle(ctx: &RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse {
    let broker = ctx.ctx();
    let (host, port) = ctx.advertised();
    let node = BrokerId(broker.config.node_id);
    if let Some(cluster) = broker.cluster.get() {
        let image = cluster.image();
        // The brokers on the listener the request came in on; Kafka lists the fenced ones only
        // when asked (v2 `include_fenced_brokers`), and marks them.
        let brokers = image
            .nodes_on(&ctx.session.listener.name, req.include_fenced_brokers)
            .into_iter()
            .map(|(b, fenced)| {
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.id))
                    .with_host(StrBytes::from_string(b.host))
                    .with_port(b.port)
                    .with_rack(b.rack.map(StrBytes::from_string))
                    .with_is_fenced(fenced)
            })
            .collect();
        return DescribeClusterResponse::default()
            .with_cluster_authorized_operations(ctx.access().operations(
                req.include_cluster_authorized_operations,
                crate::security::acl::ResourceType::Cluster,
                crate::security::acl::CLUSTER_NAME,
            ))
            .with_cluster_id(StrBytes::from_string(broker.cluster_id_for_clients()))
            .with_controller_id(BrokerId(cluster.controller().unwrap_or(-1)))
            .with_brokers(brokers);
    }
    DescribeClusterResponse::default()
        .with_cluster_authorized_operations(ctx.access().operations(
            req.include_cluster_authorized_operations,
            crate::security::acl::ResourceType::Cluster,
            crate::security::acl::CLUSTER_NAME,
        ))
        .with_cluster_id(StrBytes::from_string(broker.cluster_id.clone()))
        .with_controller_id(node)
        .with_brokers(vec![DescribeClusterBroker::default()
            .with_broker_id(node)
            .with_host(StrBytes::from_string(host))
            .with_port(port)])
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use kafka_protocol::messages::ApiKey;

    #[test]
    fn given_single_node_when_describing_cluster_then_self_is_controller() {
        let h = Harness::new();
        let r: DescribeClusterResponse = h.call(
            ApiKey::DescribeCluster,
            1,
            DescribeClusterRequest::default(),
        );
        assert_eq!(r.cluster_id.as_str(), "test-cluster");
        assert_eq!(r.brokers.len(), 1);
        assert_eq!((r.controller_id.0, r.brokers[0].port), (0, 9092));
    }
}
