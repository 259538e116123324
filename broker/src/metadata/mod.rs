//! What Kafka keeps in KRaft's metadata log: the topic catalog (names, ids, partition counts,
//! config overrides), topic creation, producer-id blocks and feature levels. A single node keeps them in
//! files in the data dir; a cluster will replicate the same state machine.

pub mod acls;
pub mod catalog;
pub mod features;
pub mod group_configs;
pub mod producer_ids;
pub mod quotas;
pub mod scram;
pub mod topics;
