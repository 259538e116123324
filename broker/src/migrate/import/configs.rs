//! Topic and broker configs for `strom migrate import` when they come from Kafka's KRaft
//! metadata log (no `--configs-from`): which metadata log, which topic configs Strom
//! accepts, and which dynamic broker configs it carries into its own dynamic config store.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::report::Report;
use crate::config::dynamic;
use crate::migrate::kraft::{self, MetadataImage};
use crate::migrate::target::Target;
use crate::migrate::{ImportArgs, MigrateError};

/// Kafka's metadata image, when topic configs are to come from it. An unreadable metadata
/// log is reported (the topics get Strom's defaults), not fatal: the data is still good.
pub(super) fn read_metadata(
    args: &ImportArgs,
    found: &[PathBuf],
    report: &mut Report,
) -> Result<Option<MetadataImage>, MigrateError> {
    let dir = match (&args.metadata_dir, found) {
        (Some(d), _) => {
            // Named explicitly: a wrong path is a mistake to point out, not a reason to
            // import with default configs.
            let dir = kraft::metadata_partition_dir(d);
            if !dir.is_dir() {
                return Err(MigrateError::Refused(format!(
                    "--metadata-dir: {} is not a KRaft metadata log dir",
                    dir.display()
                )));
            }
            dir
        }
        (None, [one]) => one.clone(),
        (None, []) => {
            report.not_carried.push(
                "topic configs: no KRaft metadata log (__cluster_metadata-0) in the --from \
                 dirs; give --metadata-dir or --configs-from. Topics get Strom's defaults"
                    .into(),
            );
            return Ok(None);
        }
        (None, [a, b, ..]) => {
            return Err(MigrateError::Refused(format!(
                "two KRaft metadata logs: {} and {}; name one with --metadata-dir",
                a.display(),
                b.display()
            )))
        }
    };
    match kraft::read(&dir) {
        Ok(image) => {
            report.metadata = Some(image.source.clone());
            Ok(Some(image))
        }
        Err(e) => {
            report.not_carried.push(format!(
                "topic configs: Kafka's metadata log {} is not readable ({e}); topics get \
                 Strom's defaults (--configs-from reads them from a running broker)",
                dir.display()
            ));
            Ok(None)
        }
    }
}

/// A topic's configs from the metadata image that Strom accepts; others are reported.
pub(super) fn metadata_topic_configs(
    name: &str,
    image: &MetadataImage,
    report: &mut Report,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in image.topic_configs(name) {
        match crate::config::topic::validate(&k, &v) {
            Ok(()) => {
                out.insert(k, v);
            }
            Err(e) => report
                .not_carried
                .push(format!("topic {name}: config {k}={v} ({e})")),
        }
    }
    out
}

/// Dynamic broker configs of Kafka's metadata (cluster-wide defaults, and this broker's
/// own values) that Strom applies dynamically too go into Strom's dynamic config store at
/// the same level; a value Strom already has there is kept. Everything else is reported.
pub(super) fn carry_broker_configs(
    target: &Target,
    image: &MetadataImage,
    kafka_node: Option<i32>,
    report: &mut Report,
) -> Result<(), MigrateError> {
    let data_dir = &target.data_dir;
    let mut stored = dynamic::load(data_dir).map_err(|e| MigrateError::Target(e.to_string()))?;
    let node = target.node_id.to_string();
    let mut changed = false;
    for (kind, resource, k, v) in image.other_configs() {
        let scope = match (kind, resource) {
            (kraft::RESOURCE_BROKER, "") => "cluster-wide default",
            (kraft::RESOURCE_BROKER, r)
                if Some(r) == kafka_node.map(|n| n.to_string()).as_deref() =>
            {
                "this broker"
            }
            (kraft::RESOURCE_BROKER, _) => {
                report.not_carried.push(format!(
                    "broker config {k}={v} of broker {resource}: another broker's"
                ));
                continue;
            }
            _ => {
                report.not_carried.push(format!(
                    "config {k}={v} of resource type {kind} {resource:?}: not a topic or \
                     broker config"
                ));
                continue;
            }
        };
        let applied = dynamic::dynamic_topic_default(k).is_some()
            || dynamic::APPLIED_BROKER_DYNAMIC.contains(&k);
        if !applied || dynamic::validate_value(k, v).is_err() {
            report.not_carried.push(format!(
                "broker config {k}={v} ({scope}): Strom does not apply it dynamically; set it \
                 in Strom's config file if it has the key"
            ));
            continue;
        }
        let level = if resource.is_empty() {
            &mut stored.cluster
        } else {
            stored.brokers.entry(node.clone()).or_default()
        };
        match level.get(k) {
            Some(ours) if ours != v => report.not_carried.push(format!(
                "broker config {k}={v} ({scope}): Strom has {k}={ours} already, kept"
            )),
            Some(_) => {}
            None => {
                level.insert(k.to_string(), v.to_string());
                report.broker_configs.push(format!("{k}={v} ({scope})"));
                changed = true;
            }
        }
    }
    if changed {
        dynamic::save(data_dir, &stored).map_err(|e| MigrateError::Target(e.to_string()))?;
    }
    Ok(())
}
