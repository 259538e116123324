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
fn given_kafkas_name_of_a_strom_setting_when_loading_then_its_field() {
    let (c, _) = load(
        None,
        env(&[]),
        &[
            ("strom.raft.listen".into(), "127.0.0.1:9195".into()),
            ("strom.priority.alpha".into(), "0.5".into()),
        ],
    )
    .unwrap();
    assert_eq!(c.raft_listen, "127.0.0.1:9195");
    assert_eq!(c.priority_alpha, 0.5);
    assert!(load(None, env(&[]), &[("strom.no.such".into(), "1".into())]).is_err());
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

#[test]
fn given_listener_jaas_configs_from_file_env_and_flags_when_loading_then_collected_by_listener() {
    use super::security::SaslMechanism;
    let jaas = |user: &str| {
        format!(
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{user}\" password=\"p\";"
        )
    };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("strom.toml");
    std::fs::write(
        &p,
        format!(
            "listeners = \"SASL_SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0\"\n\
             listener.security.protocol.map = \"SASL_SSL:SASL_SSL,INTERNAL:SASL_PLAINTEXT\"\n\
             inter.broker.listener.name = \"INTERNAL\"\n\
             controller.quorum.voters = \"1@127.0.0.1:9093\"\n\
             node.id = 1\n\
             ssl.keystore.location = \"k.pem\"\n\
             [listener.name.internal.scram-sha-512.sasl]\njaas.config = '{}'\n",
            jaas("from-file")
        ),
    )
    .unwrap();
    let plain_jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"p\";";
    let env_jaas = env(&[(
        "STROM_LISTENER_NAME_SASL_SSL_PLAIN_SASL_JAAS_CONFIG",
        plain_jaas,
    )]);
    let flag_jaas = (
        "listener.name.internal.scram-sha-256.sasl.jaas.config".to_string(),
        jaas("from-flag"),
    );
    // Two mechanisms on the inter-broker listener: which one is for Strom to be told.
    let err = load(Some(&p), env_jaas.clone(), std::slice::from_ref(&flag_jaas))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sasl_mechanism_inter_broker_protocol"),
        "{err}"
    );
    let mechanism = (
        "sasl.mechanism.inter.broker.protocol".to_string(),
        "SCRAM-SHA-512".to_string(),
    );
    let (c, origins) = load(Some(&p), env_jaas, &[flag_jaas, mechanism]).unwrap();
    let keys: Vec<_> = c.listener_jaas.0.keys().cloned().collect();
    assert_eq!(
        keys,
        [
            ("INTERNAL".to_string(), SaslMechanism::ScramSha256),
            ("INTERNAL".to_string(), SaslMechanism::ScramSha512),
            ("SASL_SSL".to_string(), SaslMechanism::Plain),
        ]
    );
    assert_eq!(
        origins["listener_name_sasl_ssl_plain_sasl_jaas_config"],
        Origin::Env
    );
    let ib = c.inter_broker(&c.listener_configs().unwrap()).unwrap();
    assert_eq!(ib.sasl.unwrap().1.username, "from-file");
    // The password never shows in the config's Debug.
    assert!(!format!("{c:?}").contains("password=\\\"p"));
    // A JAAS config Strom cannot read stops the start with its key named.
    let err = load(
        Some(&p),
        env(&[]),
        &[(
            "listener.name.internal.gssapi.sasl.jaas.config".into(),
            "x required;".into(),
        )],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("listener_name_internal_gssapi_sasl_jaas_config"),
        "{err}"
    );
    // Without the broker's credentials a clustered SASL inter-broker listener does not start.
    let err = load(
        None,
        env(&[]),
        &[
            ("listeners".into(), "SASL_SSL://127.0.0.1:0".into()),
            ("controller.quorum.voters".into(), "1@127.0.0.1:9093".into()),
            ("node.id".into(), "1".into()),
            ("ssl.keystore.location".into(), "k.pem".into()),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("sasl_mechanism_inter_broker_protocol"),
        "{err}"
    );
}
