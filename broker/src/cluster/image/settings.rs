//! The image's arms for what Kafka keeps in KRaft besides topics and brokers: ACLs, SCRAM
//! credentials, client quotas, dynamic configs and feature levels. Each applies the rule a
//! single node applies to its own file (`metadata::*`), so a cluster and a single node decide
//! alike. The handlers validate a request before they propose it, so these arms only make the
//! change; feature levels are the exception: whether an update is allowed depends on the
//! levels in force, so it is decided here, against the image.

use std::collections::BTreeMap;

use super::{ConfigResource, MetadataImage, Outcome};
use crate::metadata::acls;
use crate::metadata::features::{self, FeatureError, FeatureUpdate, Finalized};
use crate::metadata::quotas::{self, QuotaAlteration, QuotaEntity};
use crate::metadata::scram::{self, CredentialChange};
use crate::security::acl::{AclBinding, AclFilter};

impl MetadataImage {
    pub(super) fn create_acls(&mut self, new: &[AclBinding]) -> Outcome {
        acls::add(&mut self.acls, new);
        Outcome::Done
    }

    pub(super) fn delete_acls(&mut self, filters: &[AclFilter]) -> Outcome {
        Outcome::AclsDeleted(acls::remove(&mut self.acls, filters))
    }

    pub(super) fn alter_credentials(&mut self, changes: &[CredentialChange]) -> Outcome {
        scram::apply_changes(&mut self.users, changes);
        Outcome::Done
    }

    pub(super) fn alter_quotas(&mut self, changes: &[(QuotaEntity, QuotaAlteration)]) -> Outcome {
        quotas::apply_alterations(&mut self.quotas, changes);
        Outcome::Done
    }

    /// Replaces the resource's configs (an empty set removes the entry); a topic must exist.
    pub(super) fn set_configs(
        &mut self,
        resource: &ConfigResource,
        configs: &BTreeMap<String, String>,
    ) -> Outcome {
        let (map, key) = match resource {
            ConfigResource::Topic(name) => {
                return match self.topics.get_mut(name) {
                    Some(t) => {
                        t.configs = configs.clone();
                        Outcome::Done
                    }
                    None => Outcome::UnknownTopic,
                };
            }
            ConfigResource::Broker(node) => (
                &mut self.broker_configs,
                node.map(|n| n.to_string()).unwrap_or_default(),
            ),
            ConfigResource::Group(name) => (&mut self.group_configs, name.clone()),
            ConfigResource::ClientMetrics(name) => (&mut self.client_metrics, name.clone()),
        };
        if configs.is_empty() {
            map.remove(&key);
        } else {
            map.insert(key, configs.clone());
        }
        Outcome::Done
    }

    /// Kafka's `FeatureControlManager.updateFeatures`: all or nothing, with its checks and
    /// messages (`features::plan`).
    pub(super) fn update_features(
        &mut self,
        updates: &[FeatureUpdate],
        node: i32,
        local: &Finalized,
    ) -> Outcome {
        let current = self.features.clone().unwrap_or_else(|| local.clone());
        match features::plan(&current, updates, node) {
            Ok(next) => {
                self.features = Some(next);
                Outcome::Done
            }
            Err(FeatureError::InvalidUpdate(msg)) => Outcome::Refused(msg),
            Err(other) => Outcome::Refused(other.to_string()),
        }
    }
}
