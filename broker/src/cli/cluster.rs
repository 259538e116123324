//! `strom cluster info|health|config get|set`: the brokers, whether every partition has a
//! leader and a full ISR (rpk's `cluster health`), and broker configs.

use std::collections::BTreeSet;

use clap::Subcommand;
use kafka_protocol::messages::{ApiKey, DescribeClusterRequest};
use serde::Serialize;

use super::client::{BrokerAddr, Client};
use super::error::CliError;
use super::output::{Format, Render, Table};
use super::split_kv;
use super::topic::{self, ConfigEntry, RESOURCE_BROKER};

#[derive(Subcommand)]
pub enum ClusterCmd {
    /// Cluster id, controller and brokers.
    Info,
    /// Healthy when every broker is up and every partition has a leader and a full ISR
    /// (exit 4 when not).
    Health,
    /// Broker configs.
    #[command(subcommand)]
    Config(ConfigCmd),
}

#[derive(Subcommand)]
pub enum ConfigCmd {
    /// Show broker configs (all, or the keys named).
    Get {
        keys: Vec<String>,
        /// Broker id (default: the first broker).
        #[arg(long)]
        broker: Option<i32>,
    },
    /// Set broker configs dynamically (IncrementalAlterConfigs), cluster-wide by default.
    Set {
        #[arg(required = true, value_name = "KEY=VALUE")]
        pairs: Vec<String>,
        /// One broker only (default: the cluster-wide default, applied by every broker).
        #[arg(long)]
        broker: Option<i32>,
    },
}

pub async fn run(client: &mut Client, cmd: ClusterCmd, format: Format) -> Result<(), CliError> {
    match cmd {
        ClusterCmd::Info => {
            let i = info(client).await?;
            super::output::print(&i, format)?;
        }
        ClusterCmd::Health => {
            let h = health(client).await?;
            super::output::print(&h, format)?;
            if !h.healthy {
                return Err(CliError::Unhealthy);
            }
        }
        ClusterCmd::Config(ConfigCmd::Get { keys, broker }) => {
            let broker = match broker {
                Some(b) => b,
                None => {
                    let md = client.metadata(Some(&[])).await?;
                    md.brokers.iter().map(|b| b.node_id.0).min().unwrap_or(0)
                }
            };
            let configs =
                topic::describe_configs(client, RESOURCE_BROKER, &broker.to_string(), &keys)
                    .await?;
            super::output::print(&BrokerConfigs { broker, configs }, format)?;
        }
        ClusterCmd::Config(ConfigCmd::Set { pairs, broker }) => {
            let set = pairs
                .iter()
                .map(|p| split_kv(p))
                .collect::<Result<Vec<_>, _>>()?;
            if broker.is_some() {
                client.metadata(Some(&[])).await?;
            }
            let name = broker.map(|b| b.to_string()).unwrap_or_default();
            let r = topic::alter_configs(client, RESOURCE_BROKER, &name, &set, &[]).await?;
            let failed = r.error.is_some();
            let out = ConfigSet {
                broker,
                set: set.iter().map(|(k, _)| k.clone()).collect(),
                error: r.error,
            };
            super::output::print(&out, format)?;
            if failed {
                return Err(CliError::Partial {
                    failed: 1,
                    total: 1,
                });
            }
        }
    }
    Ok(())
}

#[derive(Debug, Serialize)]
pub struct BrokerConfigs {
    pub broker: i32,
    pub configs: Vec<ConfigEntry>,
}

impl Render for BrokerConfigs {
    fn table(&self, t: &mut Table) {
        topic::config_table(&self.configs, t);
    }
}

#[derive(Debug, Serialize)]
pub struct ConfigSet {
    /// `null`: the cluster-wide default.
    pub broker: Option<i32>,
    pub set: Vec<String>,
    pub error: Option<super::error::ItemError>,
}

impl Render for ConfigSet {
    fn table(&self, t: &mut Table) {
        let target = self
            .broker
            .map(|b| format!("broker {b}"))
            .unwrap_or_else(|| "cluster default".into());
        t.header(&["KEY", "TARGET", "STATUS"]);
        for k in &self.set {
            t.row([k.clone(), target.clone(), topic::status(&self.error)]);
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ClusterInfo {
    pub cluster_id: Option<String>,
    pub controller: i32,
    pub brokers: Vec<BrokerAddr>,
    pub topics: usize,
    pub partitions: usize,
}

impl Render for ClusterInfo {
    fn table(&self, t: &mut Table) {
        t.row(["CLUSTER", self.cluster_id.as_deref().unwrap_or("-")]);
        t.row(["CONTROLLER", &self.controller.to_string()]);
        t.row(["TOPICS", &self.topics.to_string()]);
        t.row(["PARTITIONS", &self.partitions.to_string()]);
        t.section();
        t.header(&["ID", "HOST", "PORT", "RACK"]);
        for b in &self.brokers {
            let id = if b.node_id == self.controller {
                format!("{}*", b.node_id)
            } else {
                b.node_id.to_string()
            };
            t.row([
                id,
                b.host.clone(),
                b.port.to_string(),
                b.rack.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
    }
}

pub async fn info(client: &mut Client) -> Result<ClusterInfo, CliError> {
    let md = client.metadata(None).await?;
    let mut controller = md.controller_id.0;
    let mut cluster_id = md.cluster_id.as_ref().map(|c| c.to_string());
    // DescribeCluster names the active controller as Kafka's admin tools see it.
    if client.supports(ApiKey::DescribeCluster, 0) {
        if let Ok((d, _)) = client
            .call(super::client::ANY, &DescribeClusterRequest::default(), 1)
            .await
        {
            if d.error_code == 0 {
                controller = d.controller_id.0;
                cluster_id = Some(d.cluster_id.to_string());
            }
        }
    }
    Ok(ClusterInfo {
        cluster_id,
        controller,
        brokers: client.brokers.values().cloned().collect(),
        topics: md.topics.iter().filter(|t| t.error_code == 0).count(),
        partitions: md.topics.iter().map(|t| t.partitions.len()).sum(),
    })
}

#[derive(Debug, Serialize)]
pub struct PartitionRef {
    pub topic: String,
    pub partition: i32,
}

#[derive(Debug, Serialize)]
pub struct Health {
    pub healthy: bool,
    pub controller: i32,
    pub brokers: Vec<i32>,
    pub brokers_down: Vec<i32>,
    pub leaderless_partitions: Vec<PartitionRef>,
    pub under_replicated_partitions: Vec<PartitionRef>,
}

impl Render for Health {
    fn table(&self, t: &mut Table) {
        let list = |v: &[PartitionRef]| {
            if v.is_empty() {
                "[]".to_string()
            } else {
                v.iter()
                    .map(|p| format!("{}/{}", p.topic, p.partition))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        };
        t.row(["HEALTHY", &self.healthy.to_string()]);
        t.row(["CONTROLLER", &self.controller.to_string()]);
        t.row(["BROKERS", &format!("{:?}", self.brokers)]);
        t.row(["BROKERS-DOWN", &format!("{:?}", self.brokers_down)]);
        t.row(["LEADERLESS-PARTITIONS", &list(&self.leaderless_partitions)]);
        t.row([
            "UNDER-REPLICATED-PARTITIONS",
            &list(&self.under_replicated_partitions),
        ]);
    }
}

pub async fn health(client: &mut Client) -> Result<Health, CliError> {
    let md = client.metadata(None).await?;
    let brokers: BTreeSet<i32> = md.brokers.iter().map(|b| b.node_id.0).collect();
    let mut replicas: BTreeSet<i32> = BTreeSet::new();
    let mut leaderless = Vec::new();
    let mut under = Vec::new();
    for t in &md.topics {
        let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
        for p in &t.partitions {
            replicas.extend(p.replica_nodes.iter().map(|b| b.0));
            let pref = || PartitionRef {
                topic: name.clone(),
                partition: p.partition_index,
            };
            if p.leader_id.0 < 0 || p.error_code == 5 {
                leaderless.push(pref());
            }
            if p.isr_nodes.len() < p.replica_nodes.len() {
                under.push(pref());
            }
        }
    }
    let down: Vec<i32> = replicas.difference(&brokers).copied().collect();
    Ok(Health {
        healthy: down.is_empty()
            && leaderless.is_empty()
            && under.is_empty()
            && !brokers.is_empty(),
        controller: md.controller_id.0,
        brokers: brokers.into_iter().collect(),
        brokers_down: down,
        leaderless_partitions: leaderless,
        under_replicated_partitions: under,
    })
}
