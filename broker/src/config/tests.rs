//! Config loading: layering, Kafka's dotted names, validation, the deploy file.
use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn given_nothing_when_loading_then_kafka_defaults() {
    let (c, _) = load(None, env(&[]), &[]).unwrap();
    assert_eq!(c, BrokerConfig::default());
    assert_eq!(c.listen.port(), 9092);
    assert_eq!(c.message_max_bytes, 1_048_588);
}

#[test]
fn given_env_var_when_loading_then_it_overrides_default() {
    let (c, o) = load(
        None,
        env(&[
            ("STROM_LOG_RETENTION_CHECK_INTERVAL_MS", "1000"),
            ("STROM_UNRELATED_THING", "x"),
        ]),
        &[],
    )
    .unwrap();
    assert_eq!(c.log_retention_check_interval_ms, 1000);
    assert_eq!(o["log_retention_check_interval_ms"], Origin::Env);
}

#[test]
fn given_dotted_kafka_keys_in_file_when_loading_then_flattened() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("strom.toml");
    std::fs::write(
        &p,
        "log.retention.check.interval.ms = 5\nnum_partitions = 3\n[auto.create.topics]\nenable = false\n",
    )
    .unwrap();
    let (c, _) = load(Some(&p), env(&[]), &[]).unwrap();
    assert_eq!(c.log_retention_check_interval_ms, 5);
    assert_eq!(c.num_partitions, 3);
    assert!(!c.auto_create_topics_enable);
}

#[test]
fn given_flag_and_env_when_loading_then_flag_wins() {
    let (c, _) = load(
        None,
        env(&[("STROM_NUM_PARTITIONS", "4")]),
        &[("num_partitions".into(), "7".into())],
    )
    .unwrap();
    assert_eq!(c.num_partitions, 7);
}

#[test]
fn given_bad_value_when_loading_then_error_names_key_and_origin() {
    let err = load(None, env(&[("STROM_NUM_PARTITIONS", "many")]), &[]).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("num_partitions") && msg.contains("environment"),
        "{msg}"
    );
    let err = load(None, env(&[("STROM_NUM_PARTITIONS", "0")]), &[]).unwrap_err();
    assert!(err.to_string().contains("num_partitions"));
}

#[test]
fn given_connectors_in_file_when_loading_then_left_to_the_connectors_crate() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("strom.toml");
    std::fs::write(
        &p,
        "num_partitions = 2\nconnectors_admin_listen = \"127.0.0.1:1\"\n[[connectors]]\nname = \"x\"\n",
    )
    .unwrap();
    let (config, _) = load(Some(&p), env(&[]), &[]).unwrap();
    assert_eq!(config.num_partitions, 2);
}

#[test]
fn given_unknown_key_in_file_when_loading_then_error_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("strom.toml");
    std::fs::write(&p, "no_such_key = 1\n").unwrap();
    let err = load(Some(&p), env(&[]), &[]).unwrap_err().to_string();
    assert!(err.contains("no_such_key"), "{err}");
}

#[test]
fn given_deploy_strom_toml_when_loading_then_every_key_present_and_equal_to_defaults() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/strom.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let file: toml::Table = toml::from_str(&text).unwrap();
    let defaults = toml::Table::try_from(BrokerConfig::default()).unwrap();
    for key in defaults.keys() {
        assert!(file.contains_key(key), "deploy/strom.toml lacks `{key}`");
    }
    let (c, _) = load(Some(&path), env(&[]), &[]).unwrap();
    assert_eq!(c, BrokerConfig::default());
}

#[test]
fn given_advertised_listener_when_asked_then_host_and_port() {
    let (c, _) = load(
        None,
        env(&[]),
        &[("advertised_listener".into(), "example:19092".into())],
    )
    .unwrap();
    let l = &c.listener_configs().unwrap()[0];
    assert_eq!(
        (l.advertised_host.as_str(), l.advertised_port),
        ("example", 19092)
    );
    let err = load(
        None,
        env(&[]),
        &[("advertised_listener".into(), "nope".into())],
    );
    assert!(err.is_err());
}
