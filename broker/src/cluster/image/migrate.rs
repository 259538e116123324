//! `Command::Migrate`: a single node's data dir joins the image on the node's first
//! clustered start (`cluster/migrate.rs` proposes it). Its topics keep their ids, partition
//! counts and configs, with one replica, led by the node at epoch 0 (the epoch its batches
//! already carry); producer ids continue above the ones it handed out. All or nothing for
//! topics: one the image holds under another id (or an id the image gives another name)
//! refuses the whole migration, since following the image would delete the node's log. For
//! the rest the image wins where both hold a value (the first node to migrate a user or a
//! quota sets it; `strom user add` run on every node before their first start is the usual
//! case), and the outcome names what was kept so the proposer can say so.

use std::collections::BTreeMap;

use super::{MetadataImage, Migration, Outcome, PartitionRecord, TopicRecord};
use crate::metadata::acls;

impl MetadataImage {
    pub(super) fn migrate(&mut self, m: &Migration) -> Outcome {
        for (name, t) in &m.topics {
            if let Some(have) = self.topics.get(name) {
                if have.id != t.id {
                    return Outcome::MigrationConflict(format!(
                        "the cluster has a topic {name} with id {}, this node's data dir one with id {}",
                        have.id, t.id
                    ));
                }
            } else if let Some((other, _)) = self.topics.iter().find(|(_, r)| r.id == t.id) {
                return Outcome::MigrationConflict(format!(
                    "the cluster's topic {other} has the id {} of this node's topic {name}",
                    t.id
                ));
            }
        }
        for (name, t) in &m.topics {
            if self.topics.contains_key(name) {
                continue; // migrated before (a retry after a crash): the same topic
            }
            let partition = PartitionRecord {
                leader: m.node,
                leader_epoch: 0,
                replicas: vec![m.node],
                isr: vec![m.node],
                adding: Vec::new(),
                removing: Vec::new(),
            };
            self.topics.insert(
                name.clone(),
                TopicRecord {
                    id: t.id,
                    configs: t.configs.clone(),
                    internal: t.internal,
                    partitions: vec![partition; t.partitions.max(0) as usize],
                },
            );
        }
        let mut kept = Vec::new();
        acls::add(&mut self.acls, &m.acls);
        for (user, mechanisms) in &m.users {
            for (mechanism, credential) in mechanisms {
                let have = self.users.entry(user.clone()).or_default();
                match have.get(mechanism) {
                    None => {
                        have.insert(*mechanism, credential.clone());
                    }
                    Some(c) if c != credential => kept.push(format!(
                        "the {} credential of user {user}",
                        mechanism.name()
                    )),
                    Some(_) => {}
                }
            }
        }
        for (entity, values) in &m.quotas {
            match self.quotas.get(entity) {
                None => {
                    self.quotas.insert(entity.clone(), values.clone());
                }
                Some(v) if v != values => kept.push(format!("the client quotas of {entity:?}")),
                Some(_) => {}
            }
        }
        for (scope, configs) in &m.broker_configs {
            let have = self.broker_configs.entry(scope.clone()).or_default();
            for (key, value) in configs {
                match have.get(key) {
                    None => {
                        have.insert(key.clone(), value.clone());
                    }
                    Some(v) if v != value => {
                        kept.push(format!("the dynamic broker config {key} of {scope:?}"))
                    }
                    Some(_) => {}
                }
            }
            if have.is_empty() {
                self.broker_configs.remove(scope);
            }
        }
        merge_named(
            &mut self.group_configs,
            &m.group_configs,
            "group",
            &mut kept,
        );
        merge_named(
            &mut self.client_metrics,
            &m.client_metrics,
            "client metrics subscription",
            &mut kept,
        );
        match &self.features {
            None => self.features = Some(m.features.clone()),
            Some(f) if f.levels != m.features.levels => {
                kept.push("the finalized feature levels".into())
            }
            Some(_) => {}
        }
        self.next_producer_id = self.next_producer_id.max(m.next_producer_id);
        Outcome::Migrated { kept }
    }
}

/// Adds the named config sets the image lacks; one it holds with other values is kept.
fn merge_named(
    have: &mut BTreeMap<String, BTreeMap<String, String>>,
    from: &BTreeMap<String, BTreeMap<String, String>>,
    what: &str,
    kept: &mut Vec<String>,
) {
    for (name, configs) in from {
        match have.get(name) {
            None => {
                have.insert(name.clone(), configs.clone());
            }
            Some(c) if c != configs => kept.push(format!("the configs of {what} {name}")),
            Some(_) => {}
        }
    }
}
