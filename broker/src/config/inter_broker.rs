//! How this broker talks to the other brokers of a cluster (follower fetches, transaction
//! markers, AddPartitionsToTxn verification), Kafka's way:
//!
//! - `inter.broker.listener.name` names the listener the calls go to on the peer (its
//!   advertised endpoint there, from the metadata image); `security.inter.broker.protocol`
//!   names it by protocol instead (the listener of that name); at most one of the two. With
//!   neither, Kafka's default is the PLAINTEXT listener; Strom takes it when there is one and
//!   else the first listener (Kafka would refuse to start).
//! - On a SASL listener, `sasl.mechanism.inter.broker.protocol` (PLAIN, SCRAM-SHA-256 or
//!   SCRAM-SHA-512; Kafka's default GSSAPI is not implemented) with the broker's own
//!   credentials in `listener.name.<listener>.<mechanism>.sasl.jaas.config`, Kafka's JAAS line
//!   (`...ScramLoginModule required username="broker" password="...";`). Unset, the mechanism
//!   is that of the listener's only JAAS config.
//! - On a TLS listener the broker's keystore is its client certificate and its truststore
//!   verifies the peer (`server::tls`).
//!
//! The JAAS keys carry a listener and a mechanism in their name, so they are no field of
//! `BrokerConfig`: `load` collects them into `JaasConfigs`.

use std::collections::BTreeMap;

use super::listeners::{ListenerConfig, SecurityProtocol};
use super::security::{parse_mechanisms, SaslMechanism};
use super::BrokerConfig;

/// `listener.name.<listener>.<mechanism>.sasl.jaas.config` values by (LISTENER, MECHANISM).
/// They hold passwords: `Debug` shows the keys only.
#[derive(Clone, Default, PartialEq)]
pub struct JaasConfigs(pub BTreeMap<(String, SaslMechanism), String>);

impl std::fmt::Debug for JaasConfigs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

const JAAS_PREFIX: &str = "listener_name_";
const JAAS_SUFFIX: &str = "_sasl_jaas_config";

/// Whether `key` (normalised: `listener_name_internal_scram_sha_512_sasl_jaas_config`) is a
/// listener's JAAS config; then its (LISTENER, mechanism), or why it is not one Strom reads.
pub fn jaas_key(key: &str) -> Option<Result<(String, SaslMechanism), String>> {
    let middle = key.strip_prefix(JAAS_PREFIX)?.strip_suffix(JAAS_SUFFIX)?;
    let found = [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
    ]
    .into_iter()
    .find_map(|m| {
        let suffix = format!("_{}", m.name().to_ascii_lowercase().replace('-', "_"));
        let listener = middle.strip_suffix(&suffix)?;
        (!listener.is_empty()).then(|| (listener.to_ascii_uppercase(), m))
    });
    Some(found.ok_or_else(|| {
        "Strom reads the JAAS config of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 only \
         (listener.name.<listener>.<mechanism>.sasl.jaas.config): the broker's own \
         credentials for inter-broker calls"
            .to_string()
    }))
}

/// A parsed JAAS line: the credentials it gives.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasLogin {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for JaasLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JaasLogin({:?}, [hidden])", self.username)
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

fn tokens(s: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '=' => {
                chars.next();
                out.push(Token::Equals);
            }
            ';' => {
                chars.next();
                out.push(Token::Semicolon);
            }
            '"' => {
                chars.next();
                let mut v = String::new();
                loop {
                    match chars.next() {
                        None => return Err("a quoted value is not closed".into()),
                        Some('"') => break,
                        Some('\\') => v.push(chars.next().ok_or("a quoted value is not closed")?),
                        Some(c) => v.push(c),
                    }
                }
                out.push(Token::Quoted(v));
            }
            _ => {
                let mut w = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || matches!(c, '=' | ';' | '"') {
                        break;
                    }
                    w.push(c);
                    chars.next();
                }
                out.push(Token::Word(w));
            }
        }
    }
    Ok(out)
}

/// Kafka's `sasl.jaas.config` form, `<LoginModule> <flag> key="value"... ;`, one login
/// module, which must be PLAIN's or SCRAM's (either gives a username and password, as in
/// Kafka). Only `username` and `password` are read, and an option Strom would ignore is
/// refused: PLAIN's `user_<name>` entries in particular, since Strom checks PLAIN passwords
/// against its SCRAM credentials (`strom user add`).
pub fn parse_jaas(s: &str) -> Result<(String, BTreeMap<String, String>), String> {
    let mut t = tokens(s)?.into_iter();
    let module = match t.next() {
        Some(Token::Word(w)) => w,
        _ => return Err("expected a login module class first".into()),
    };
    let flag = match t.next() {
        Some(Token::Word(w)) => w.to_ascii_lowercase(),
        _ => return Err(format!("expected a control flag after {module}")),
    };
    if !matches!(
        flag.as_str(),
        "required" | "requisite" | "sufficient" | "optional"
    ) {
        return Err(format!(
            "`{flag}` is not a control flag (required, requisite, sufficient, optional)"
        ));
    }
    let mut options = BTreeMap::new();
    loop {
        match t.next() {
            Some(Token::Semicolon) => break,
            Some(Token::Word(key)) => {
                if t.next() != Some(Token::Equals) {
                    return Err(format!("expected `=` after option {key}"));
                }
                let value = match t.next() {
                    Some(Token::Word(v) | Token::Quoted(v)) => v,
                    _ => return Err(format!("expected a value for option {key}")),
                };
                options.insert(key, value);
            }
            _ => return Err("expected options, then `;` at the end".into()),
        }
    }
    if t.next().is_some() {
        return Err("one login module only, ended by `;`".into());
    }
    Ok((module, options))
}

/// The credentials of one JAAS config (see `parse_jaas`); `None` for a line without any,
/// such as Kafka's server-side `ScramLoginModule required;` (Strom's SCRAM and PLAIN servers
/// read their users from the credential store, so there is nothing else to read there).
pub fn jaas_login(s: &str) -> Result<Option<JaasLogin>, String> {
    let (module, mut options) = parse_jaas(s)?;
    let class = module.rsplit('.').next().unwrap_or_default();
    if !matches!(class, "PlainLoginModule" | "ScramLoginModule") {
        return Err(format!(
            "{module}: the login module must be Kafka's PlainLoginModule or ScramLoginModule"
        ));
    }
    if let Some(k) = options.keys().find(|k| k.starts_with("user_")) {
        return Err(format!(
            "option {k}: PLAIN users are not read from the JAAS config; Strom checks PLAIN \
             passwords against its SCRAM users (`strom user add`, kafka-configs.sh)"
        ));
    }
    if let Some(k) = options
        .keys()
        .find(|k| !matches!(k.as_str(), "username" | "password"))
    {
        return Err(format!(
            "option {k} is not supported: Strom reads username and password"
        ));
    }
    if options.is_empty() {
        return Ok(None);
    }
    let mut take = |k: &str| {
        options
            .remove(k)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("no {k}"))
    };
    Ok(Some(JaasLogin {
        username: take("username")?,
        password: take("password")?,
    }))
}

/// The inter-broker listener and the credentials this broker authenticates with there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterBroker {
    pub listener: String,
    pub protocol: SecurityProtocol,
    /// On a SASL listener of a cluster.
    pub sasl: Option<(SaslMechanism, JaasLogin)>,
}

/// What went wrong: (config key, message).
type Refusal = (String, String);

fn refuse(key: &str, message: impl Into<String>) -> Refusal {
    (key.to_string(), message.into())
}

/// The JAAS config key of `listener` and `m`, as `load` normalises it.
pub fn jaas_field(listener: &str, m: SaslMechanism) -> String {
    format!(
        "{JAAS_PREFIX}{}_{}{JAAS_SUFFIX}",
        listener.to_ascii_lowercase(),
        m.name().to_ascii_lowercase().replace('-', "_")
    )
}

impl BrokerConfig {
    /// The inter-broker listener and credentials (checked at load). Credentials are required
    /// only on a cluster: a single node calls no other broker.
    pub fn inter_broker(&self, listeners: &[ListenerConfig]) -> Result<InterBroker, Refusal> {
        let by_name = self.inter_broker_listener_name.trim();
        let by_protocol = self.security_inter_broker_protocol.trim();
        let name = match (by_name.is_empty(), by_protocol.is_empty()) {
            (false, false) => {
                return Err(refuse(
                    "inter_broker_listener_name",
                    "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.",
                ))
            }
            (false, true) => by_name.to_ascii_uppercase(),
            (true, false) => SecurityProtocol::parse(by_protocol)
                .ok_or_else(|| {
                    refuse(
                        "security_inter_broker_protocol",
                        format!("`{by_protocol}` is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
                    )
                })?
                .name()
                .to_string(),
            (true, true) => listeners
                .iter()
                .find(|l| l.name == "PLAINTEXT")
                .or(listeners.first())
                .map(|l| l.name.clone())
                .unwrap_or_default(),
        };
        let Some(listener) = listeners.iter().find(|l| l.name == name) else {
            let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
            let key = if by_protocol.is_empty() {
                "inter_broker_listener_name"
            } else {
                "security_inter_broker_protocol"
            };
            return Err(refuse(
                key,
                format!(
                    "inter.broker.listener.name must be a listener name defined in advertised.listeners. \
                     The valid options based on currently configured listeners are {}",
                    names.join(",")
                ),
            ));
        };
        let sasl = if listener.protocol.sasl() {
            self.inter_broker_sasl(&name)?
        } else {
            None
        };
        Ok(InterBroker {
            listener: name,
            protocol: listener.protocol,
            sasl,
        })
    }

    fn inter_broker_sasl(
        &self,
        listener: &str,
    ) -> Result<Option<(SaslMechanism, JaasLogin)>, Refusal> {
        const KEY: &str = "sasl_mechanism_inter_broker_protocol";
        let clustered = !self.controller_quorum_voters.trim().is_empty();
        let set = self.sasl_mechanism_inter_broker_protocol.trim();
        let mechanism = if set.is_empty() {
            let mut own = self.listener_jaas.0.keys().filter(|(l, _)| l == listener);
            match (own.next(), own.next()) {
                (Some((_, m)), None) => *m,
                (None, _) if !clustered => return Ok(None),
                (None, _) => {
                    return Err(refuse(
                        KEY,
                        format!(
                            "the inter-broker listener {listener} is a SASL listener: set \
                             sasl.mechanism.inter.broker.protocol (PLAIN, SCRAM-SHA-256 or \
                             SCRAM-SHA-512; Kafka's default GSSAPI is not supported) and the \
                             broker's credentials in listener.name.{}.<mechanism>.sasl.jaas.config",
                            listener.to_ascii_lowercase()
                        ),
                    ))
                }
                (Some(_), Some(_)) => {
                    return Err(refuse(
                        KEY,
                        format!("listener {listener} has JAAS configs for more than one mechanism: say which one inter-broker calls use"),
                    ))
                }
            }
        } else {
            match SaslMechanism::from_name(&set.to_ascii_uppercase()) {
                Some(m) if m != SaslMechanism::OAuthBearer => m,
                _ => {
                    return Err(refuse(
                        KEY,
                        format!("`{set}` is not supported for inter-broker calls: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
                    ))
                }
            }
        };
        let enabled = parse_mechanisms(&self.sasl_enabled_mechanisms).unwrap_or_default();
        if !enabled.contains(&mechanism) {
            return Err(refuse(
                KEY,
                "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication",
            ));
        }
        let field = jaas_field(listener, mechanism);
        let login = match self.listener_jaas.0.get(&(listener.to_string(), mechanism)) {
            Some(text) => jaas_login(text).map_err(|m| refuse(&field, m))?,
            None => None,
        };
        match login {
            Some(login) => Ok(Some((mechanism, login))),
            None if !clustered => Ok(None),
            None => Err(refuse(
                &field,
                format!(
                    "the broker's own credentials for inter-broker calls are missing: set \
                     listener.name.{}.{}.sasl.jaas.config with a username and password",
                    listener.to_ascii_lowercase(),
                    mechanism.name().to_ascii_lowercase()
                ),
            )),
        }
    }
}

/// Checks every JAAS config (its listener exists, it parses) and the inter-broker settings.
pub fn validate(config: &BrokerConfig, listeners: &[ListenerConfig]) -> Result<(), Refusal> {
    for ((listener, m), text) in &config.listener_jaas.0 {
        let field = jaas_field(listener, *m);
        if !listeners.iter().any(|l| &l.name == listener) {
            return Err(refuse(
                &field,
                format!("{listener} is not one of the listeners"),
            ));
        }
        jaas_login(text).map_err(|e| refuse(&field, e))?;
    }
    config.inter_broker(listeners).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAM: &str = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="s3c\"ret";"#;

    fn config(listeners: &str, jaas: &[(&str, SaslMechanism, &str)]) -> BrokerConfig {
        BrokerConfig {
            listeners: listeners.into(),
            controller_quorum_voters: "1@127.0.0.1:9093".into(),
            listener_jaas: JaasConfigs(
                jaas.iter()
                    .map(|(l, m, t)| ((l.to_string(), *m), t.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn resolve(c: &BrokerConfig) -> Result<InterBroker, Refusal> {
        c.inter_broker(&c.listener_configs().unwrap())
    }

    #[test]
    fn given_jaas_lines_when_parsing_then_credentials_or_the_reason() {
        let l = jaas_login(SCRAM).unwrap().unwrap();
        assert_eq!(
            (l.username.as_str(), l.password.as_str()),
            ("broker", "s3c\"ret")
        );
        let plain = "org.apache.kafka.common.security.plain.PlainLoginModule required\n username=admin\n password = \"a b\" ;";
        assert_eq!(jaas_login(plain).unwrap().unwrap().password, "a b");
        // Kafka's server-side line gives no credentials, which is fine where none are used.
        let server = "org.apache.kafka.common.security.scram.ScramLoginModule required;";
        assert_eq!(jaas_login(server), Ok(None));
        for (bad, why) in [
            ("", "login module"),
            (
                "x.PlainLoginModule required username=\"a\" password=\"b\"",
                "`;`",
            ),
            ("x.PlainLoginModule maybe username=\"a\";", "control flag"),
            (
                "x.PlainLoginModule required username=\"a\" password=\"b\" user_a=\"b\";",
                "SCRAM users",
            ),
            (
                "x.PlainLoginModule required username=\"a\" password=\"b\" tokenauth=true;",
                "not supported",
            ),
            ("x.PlainLoginModule required username=\"a\";", "no password"),
            (
                "x.Krb5LoginModule required username=\"a\" password=\"b\";",
                "login module must be",
            ),
            (
                "x.PlainLoginModule required username=\"a\" password=\"b;",
                "not closed",
            ),
            (
                "x.PlainLoginModule required username=\"a\" password=\"b\"; y.Z required;",
                "one login module",
            ),
        ] {
            let e = jaas_login(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn given_normalised_keys_when_matching_then_listener_and_mechanism() {
        assert_eq!(
            jaas_key("listener_name_sasl_ssl_scram_sha_512_sasl_jaas_config"),
            Some(Ok(("SASL_SSL".into(), SaslMechanism::ScramSha512)))
        );
        assert_eq!(
            jaas_key("listener_name_internal_plain_sasl_jaas_config"),
            Some(Ok(("INTERNAL".into(), SaslMechanism::Plain)))
        );
        assert!(matches!(
            jaas_key("listener_name_internal_gssapi_sasl_jaas_config"),
            Some(Err(_))
        ));
        assert_eq!(jaas_key("sasl_jaas_config"), None);
        assert_eq!(
            jaas_field("SASL_SSL", SaslMechanism::ScramSha512),
            "listener_name_sasl_ssl_scram_sha_512_sasl_jaas_config"
        );
    }

    #[test]
    fn given_listener_settings_when_resolving_then_kafkas_choice() {
        // Neither set: the PLAINTEXT listener (Kafka's default), else the first.
        let c = config("SASL_SSL://127.0.0.1:1,PLAINTEXT://127.0.0.1:2", &[]);
        assert_eq!(resolve(&c).unwrap().listener, "PLAINTEXT");
        let c = config("SSL://127.0.0.1:1,INTERNAL://127.0.0.1:2", &[]);
        let c = BrokerConfig {
            listener_security_protocol_map: "SSL:SSL,INTERNAL:PLAINTEXT".into(),
            ..c
        };
        assert_eq!(resolve(&c).unwrap().listener, "SSL");
        let by_name = BrokerConfig {
            inter_broker_listener_name: "internal".into(),
            ..c.clone()
        };
        let ib = resolve(&by_name).unwrap();
        assert_eq!(
            (ib.listener.as_str(), ib.protocol),
            ("INTERNAL", SecurityProtocol::Plaintext)
        );
        let by_protocol = BrokerConfig {
            security_inter_broker_protocol: "SSL".into(),
            ..c.clone()
        };
        assert_eq!(resolve(&by_protocol).unwrap().listener, "SSL");
        let both = BrokerConfig {
            security_inter_broker_protocol: "SSL".into(),
            ..by_name.clone()
        };
        assert!(resolve(&both).unwrap_err().1.starts_with("Only one of"));
        let unknown = BrokerConfig {
            inter_broker_listener_name: "EXTERNAL".into(),
            ..c
        };
        let (key, msg) = resolve(&unknown).unwrap_err();
        assert_eq!(key, "inter_broker_listener_name");
        assert!(msg.ends_with("are SSL,INTERNAL"), "{msg}");
    }

    #[test]
    fn given_sasl_inter_broker_listener_when_resolving_then_credentials_are_needed_on_a_cluster() {
        let listeners = "SASL_SSL://127.0.0.1:1";
        let none = config(listeners, &[]);
        assert_eq!(
            resolve(&none).unwrap_err().0,
            "sasl_mechanism_inter_broker_protocol"
        );
        // A single node calls no other broker.
        let single = BrokerConfig {
            controller_quorum_voters: String::new(),
            ..none
        };
        assert_eq!(resolve(&single).unwrap().sasl, None);
        // The listener's only JAAS config gives the mechanism.
        let c = config(
            listeners,
            &[("SASL_SSL", SaslMechanism::ScramSha512, SCRAM)],
        );
        let (m, login) = resolve(&c).unwrap().sasl.unwrap();
        assert_eq!(
            (m, login.username.as_str()),
            (SaslMechanism::ScramSha512, "broker")
        );
        // A mechanism without its JAAS config, one not enabled, one not supported.
        let other = BrokerConfig {
            sasl_mechanism_inter_broker_protocol: "SCRAM-SHA-256".into(),
            ..c.clone()
        };
        assert_eq!(
            resolve(&other).unwrap_err().0,
            "listener_name_sasl_ssl_scram_sha_256_sasl_jaas_config"
        );
        let plain = BrokerConfig {
            sasl_mechanism_inter_broker_protocol: "PLAIN".into(),
            ..c.clone()
        };
        assert!(resolve(&plain)
            .unwrap_err()
            .1
            .contains("sasl.enabled.mechanisms"));
        let gssapi = BrokerConfig {
            sasl_mechanism_inter_broker_protocol: "GSSAPI".into(),
            ..c.clone()
        };
        assert!(resolve(&gssapi).unwrap_err().1.contains("not supported"));
        // A server-side line on the inter-broker listener: no credentials to call with.
        let server = "x.ScramLoginModule required;";
        let c = config(
            listeners,
            &[("SASL_SSL", SaslMechanism::ScramSha512, server)],
        );
        assert!(resolve(&c).unwrap_err().1.contains("username and password"));
        // A JAAS config for a listener that does not exist.
        let stray = config(listeners, &[("OTHER", SaslMechanism::Plain, SCRAM)]);
        let (key, _) = validate(&stray, &stray.listener_configs().unwrap()).unwrap_err();
        assert_eq!(key, "listener_name_other_plain_sasl_jaas_config");
    }
}
