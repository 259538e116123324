//! DescribeLogDirs (key 35): the one data dir, its partitions' sizes (on a cluster, of the
//! replicas this node holds), and the filesystem's total and usable bytes.

use kafka_protocol::messages::DescribeLogDirsRequest;
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::codec::describe_log_dirs::{
    DescribeLogDirsPartition, DescribeLogDirsResponse, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use crate::codec::Capped;
use crate::shard::frontend;

pub const MIN_VERSION: i16 = 1;
/// v5 says whether a dir is cordoned (`codec::describe_log_dirs`); Strom's one dir never is.
pub const MAX_VERSION: i16 = 5;

fn disk_space(path: &std::path::Path) -> (i64, i64) {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return (-1, -1);
    };
    // SAFETY: statvfs writes only into `s`, which is a properly sized, zeroed struct, and reads
    // the NUL-terminated path we own for the duration of the call.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut s) != 0 {
            return (-1, -1);
        }
        let frsize = s.f_frsize as i64;
        (s.f_blocks as i64 * frsize, s.f_bavail as i64 * frsize)
    }
}

pub async fn handle(
    ctx: &RequestContext,
    req: Capped<DescribeLogDirsRequest>,
) -> DescribeLogDirsResponse {
    let req = req.into_inner();
    let broker = ctx.ctx();
    let catalog = broker.catalog.snapshot();
    // Kafka's `handleDescribeLogDirsRequest`: DESCRIBE on the cluster, else no results and
    // CLUSTER_AUTHORIZATION_FAILED.
    if !ctx
        .access()
        .allows_cluster(crate::security::acl::Operation::Describe)
    {
        return DescribeLogDirsResponse {
            error_code: kafka_protocol::error::ResponseError::ClusterAuthorizationFailed.code(),
            ..Default::default()
        };
    }
    let wanted: Vec<(std::sync::Arc<str>, Vec<i32>)> = match req.topics {
        None => catalog
            .topics
            .values()
            .map(|t| (t.name.clone(), (0..t.partitions).collect()))
            .collect(),
        Some(ts) => ts
            .into_iter()
            .filter_map(|t| {
                catalog
                    .get(t.topic.as_str())
                    .map(|m| (m.name.clone(), t.partitions))
            })
            .collect(),
    };
    // Clustered: only the replicas this node holds, as Kafka lists the logs of its dirs (a
    // node opens every partition's directory, also of those it does not replicate).
    let image = broker.cluster.get().map(|c| c.image());
    let hosted = |topic: &str, p: i32| {
        image.as_ref().is_none_or(|i| {
            i.partition(topic, p)
                .is_some_and(|r| r.replicas.contains(&broker.config.node_id))
        })
    };
    let mut topics = Vec::new();
    for (name, parts) in wanted {
        let mut partitions = Vec::new();
        for p in parts.into_iter().filter(|p| hosted(&name, *p)) {
            if let Ok(o) = frontend::offsets(broker, name.clone(), p).await {
                partitions.push(DescribeLogDirsPartition {
                    partition_index: p,
                    partition_size: o.size_bytes as i64,
                    ..Default::default()
                });
            }
        }
        if partitions.is_empty() && image.is_some() {
            continue;
        }
        topics.push(DescribeLogDirsTopic {
            name: StrBytes::from_string(name.to_string()),
            partitions,
            ..Default::default()
        });
    }
    let dir = std::fs::canonicalize(&broker.config.data_dir)
        .unwrap_or_else(|_| broker.config.data_dir.clone());
    let (total, usable) = if ctx.version() >= 4 {
        disk_space(&dir)
    } else {
        (-1, -1)
    };
    DescribeLogDirsResponse {
        results: vec![DescribeLogDirsResult {
            log_dir: StrBytes::from_string(dir.display().to_string()),
            topics,
            total_bytes: total,
            usable_bytes: usable,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::handlers::testing::{batch, create, produce_req};
    use kafka_protocol::messages::{ApiKey, ProduceResponse};

    #[test]
    fn given_data_when_describing_log_dirs_then_sizes_and_space() {
        let h = Harness::new();
        create(&h, "t", 2);
        let _: ProduceResponse = h.call(
            ApiKey::Produce,
            11,
            produce_req("t", 0, 1, batch(5, -1, -1, -1)),
        );
        let r: DescribeLogDirsResponse = h.call(
            ApiKey::DescribeLogDirs,
            4,
            DescribeLogDirsRequest::default().with_topics(None),
        );
        let d = &r.results[0];
        assert!(d.total_bytes > 0 && d.usable_bytes > 0);
        let t = &d.topics[0];
        assert_eq!(t.partitions.len(), 2);
        let p0 = t
            .partitions
            .iter()
            .find(|p| p.partition_index == 0)
            .unwrap();
        assert!(p0.partition_size > 0);
    }
}
