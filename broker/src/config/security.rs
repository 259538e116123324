//! The TLS settings (Kafka's `ssl.*` broker configs) as typed values, checked at load.
//!
//! Only what Strom implements is accepted: PEM key stores and trust stores (Kafka's
//! `ssl.keystore.type=PEM`), TLS 1.2 and 1.3, `ssl.client.auth` none/requested/required.
//! Loading the files and building the TLS server config is `server::tls`'s work (it needs the
//! files' contents, which change at runtime); here only the shape is checked, so a typo stops
//! the broker at start with the key named.

use super::listeners::ListenerConfig;
use super::BrokerConfig;

/// Kafka's `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

impl ClientAuth {
    pub fn parse(s: &str) -> Option<ClientAuth> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Some(Self::None),
            "requested" => Some(Self::Requested),
            "required" => Some(Self::Required),
            _ => None,
        }
    }
}

/// A TLS protocol version Strom serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// `ssl.enabled.protocols` → the versions, refusing anything below TLS 1.2.
pub fn parse_protocols(s: &str) -> Result<Vec<TlsVersion>, String> {
    let mut out = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let v = match p {
            "TLSv1.2" => TlsVersion::Tls12,
            "TLSv1.3" => TlsVersion::Tls13,
            "TLSv1" | "TLSv1.1" | "SSLv3" => {
                return Err(format!("{p} is not allowed: only TLSv1.2 and TLSv1.3"))
            }
            other => return Err(format!("`{other}` is not TLSv1.2 or TLSv1.3")),
        };
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.is_empty() {
        return Err("no protocol enabled".into());
    }
    Ok(out)
}

/// Where the broker's key and chain come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// One PEM file holding the key and the chain.
    File(std::path::PathBuf),
    /// Key and chain as PEM text in the config.
    Inline { key: String, chain: String },
}

/// Where the CA certificates for client certificates come from, if anywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustSource {
    None,
    File(std::path::PathBuf),
    Inline(String),
}

/// The TLS settings, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub key: KeySource,
    pub trust: TrustSource,
    pub client_auth: ClientAuth,
    pub protocols: Vec<TlsVersion>,
}

impl BrokerConfig {
    /// The TLS settings; `Err((key, message))` names the offending config key.
    pub fn tls_settings(&self) -> Result<TlsSettings, (&'static str, String)> {
        for (key, v) in [
            ("ssl_keystore_type", &self.ssl_keystore_type),
            ("ssl_truststore_type", &self.ssl_truststore_type),
        ] {
            if !v.eq_ignore_ascii_case("PEM") {
                return Err((
                    key,
                    format!("`{v}` is not supported: only PEM (convert JKS/PKCS12 with keytool/openssl)"),
                ));
            }
        }
        let key = match (
            self.ssl_keystore_location.is_empty(),
            self.ssl_keystore_key.is_empty(),
            self.ssl_keystore_certificate_chain.is_empty(),
        ) {
            (false, true, true) => KeySource::File(self.ssl_keystore_location.clone().into()),
            (true, false, false) => KeySource::Inline {
                key: self.ssl_keystore_key.clone(),
                chain: self.ssl_keystore_certificate_chain.clone(),
            },
            (true, true, true) => {
                return Err((
                    "ssl_keystore_location",
                    "a TLS listener needs ssl.keystore.location, or ssl.keystore.key with ssl.keystore.certificate.chain".into(),
                ))
            }
            _ => {
                return Err((
                    "ssl_keystore_location",
                    "give either ssl.keystore.location or both ssl.keystore.key and ssl.keystore.certificate.chain".into(),
                ))
            }
        };
        let trust =
            match (
                self.ssl_truststore_location.is_empty(),
                self.ssl_truststore_certificates.is_empty(),
            ) {
                (true, true) => TrustSource::None,
                (false, true) => TrustSource::File(self.ssl_truststore_location.clone().into()),
                (true, false) => TrustSource::Inline(self.ssl_truststore_certificates.clone()),
                (false, false) => return Err((
                    "ssl_truststore_location",
                    "give either ssl.truststore.location or ssl.truststore.certificates, not both"
                        .into(),
                )),
            };
        let client_auth = ClientAuth::parse(&self.ssl_client_auth).ok_or((
            "ssl_client_auth",
            format!(
                "`{}` is not one of none, requested, required",
                self.ssl_client_auth
            ),
        ))?;
        if client_auth != ClientAuth::None && trust == TrustSource::None {
            return Err((
                "ssl_client_auth",
                "client certificates need a truststore (ssl.truststore.location or ssl.truststore.certificates)".into(),
            ));
        }
        let protocols = parse_protocols(&self.ssl_enabled_protocols)
            .map_err(|m| ("ssl_enabled_protocols", m))?;
        Ok(TlsSettings {
            key,
            trust,
            client_auth,
            protocols,
        })
    }
}

/// A SASL mechanism Strom serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl SaslMechanism {
    pub const ALL: [SaslMechanism; 4] = [
        Self::Plain,
        Self::ScramSha256,
        Self::ScramSha512,
        Self::OAuthBearer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
            Self::OAuthBearer => "OAUTHBEARER",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// `sasl.enabled.mechanisms` → the mechanisms, in the order given.
pub fn parse_mechanisms(s: &str) -> Result<Vec<SaslMechanism>, String> {
    let mut out = Vec::new();
    for m in s.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let mech = SaslMechanism::from_name(m).ok_or_else(|| {
            format!(
                "`{m}` is not supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are"
            )
        })?;
        if !out.contains(&mech) {
            out.push(mech);
        }
    }
    Ok(out)
}

impl BrokerConfig {
    /// The enabled SASL mechanisms (validated at load).
    pub fn sasl_mechanisms(&self) -> Vec<SaslMechanism> {
        parse_mechanisms(&self.sasl_enabled_mechanisms).unwrap_or_default()
    }
}

/// Checks the TLS settings when some listener needs them, and the values that are checked
/// whatever the listeners.
pub fn validate(
    config: &BrokerConfig,
    listeners: &[ListenerConfig],
) -> Result<(), (&'static str, String)> {
    if ClientAuth::parse(&config.ssl_client_auth).is_none() {
        return Err((
            "ssl_client_auth",
            format!(
                "`{}` is not one of none, requested, required",
                config.ssl_client_auth
            ),
        ));
    }
    parse_protocols(&config.ssl_enabled_protocols).map_err(|m| ("ssl_enabled_protocols", m))?;
    if config.ssl_reload_interval_ms < 100 {
        return Err(("ssl_reload_interval_ms", "must be >= 100".into()));
    }
    if listeners.iter().any(|l| l.protocol.tls()) {
        config.tls_settings()?;
    }
    let mechanisms = parse_mechanisms(&config.sasl_enabled_mechanisms)
        .map_err(|m| ("sasl_enabled_mechanisms", m))?;
    if mechanisms.is_empty() && listeners.iter().any(|l| l.protocol.sasl()) {
        return Err((
            "sasl_enabled_mechanisms",
            "a SASL listener needs at least one mechanism".into(),
        ));
    }
    if mechanisms.contains(&SaslMechanism::OAuthBearer) {
        validate_oauthbearer(config)?;
    }
    validate_admin(config)?;
    if config.connections_max_reauth_ms < 0 {
        return Err(("connections_max_reauth_ms", "must be >= 0".into()));
    }
    if config.connection_failed_authentication_delay_ms < 0 {
        return Err((
            "connection_failed_authentication_delay_ms",
            "must be >= 0".into(),
        ));
    }
    if config.quota_window_num < 1 {
        return Err(("quota_window_num", "must be >= 1".into()));
    }
    if config.quota_window_size_seconds < 1 {
        return Err(("quota_window_size_seconds", "must be >= 1".into()));
    }
    if config.sasl_server_max_receive_size < 1024 {
        return Err(("sasl_server_max_receive_size", "must be >= 1024".into()));
    }
    let class = config.authorizer_class_name.trim();
    if !class.is_empty() && class != crate::security::authorizer::STANDARD_AUTHORIZER {
        return Err((
            "authorizer_class_name",
            format!(
                "{class} is not available; the only authorizer is {}",
                crate::security::authorizer::STANDARD_AUTHORIZER
            ),
        ));
    }
    Ok(())
}

/// `admin_authentication` → (basic, mtls).
pub fn parse_admin_methods(s: &str) -> Result<(bool, bool), String> {
    let (mut basic, mut mtls) = (false, false);
    for m in s.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        match m.to_ascii_lowercase().as_str() {
            "basic" => basic = true,
            "mtls" => mtls = true,
            _ => return Err(format!("`{m}` is not basic or mtls")),
        }
    }
    Ok((basic, mtls))
}

/// The admin port's TLS and authentication settings (`server::admin_auth`).
fn validate_admin(config: &BrokerConfig) -> Result<(), (&'static str, String)> {
    let (_, mtls) = parse_admin_methods(&config.admin_authentication)
        .map_err(|m| ("admin_authentication", m))?;
    let auth = ClientAuth::parse(&config.admin_ssl_client_auth).ok_or((
        "admin_ssl_client_auth",
        format!(
            "`{}` is not one of none, requested, required",
            config.admin_ssl_client_auth
        ),
    ))?;
    if mtls && (!config.admin_ssl_enable || auth == ClientAuth::None) {
        return Err((
            "admin_authentication",
            "mtls needs admin_ssl_enable = true and admin_ssl_client_auth requested or required"
                .into(),
        ));
    }
    if config.admin_ssl_enable {
        let s = config.tls_settings()?;
        if auth != ClientAuth::None && s.trust == TrustSource::None {
            return Err((
                "admin_ssl_client_auth",
                "client certificates need a truststore (ssl.truststore.location or ssl.truststore.certificates)".into(),
            ));
        }
    }
    Ok(())
}

/// OAUTHBEARER needs a JWKS: Kafka's default without one is its unsecured validator, which
/// accepts unsigned tokens, so Strom refuses to start instead.
fn validate_oauthbearer(config: &BrokerConfig) -> Result<(), (&'static str, String)> {
    let url = config.sasl_oauthbearer_jwks_endpoint_url.trim();
    if url.is_empty() {
        return Err((
            "sasl_oauthbearer_jwks_endpoint_url",
            "OAUTHBEARER needs the JWKS that signs tokens: a file:// or http(s):// URL on this machine".into(),
        ));
    }
    crate::security::jwks::JwksSource::parse(url)
        .map_err(|e| ("sasl_oauthbearer_jwks_endpoint_url", e.to_string()))?;
    if config.sasl_oauthbearer_jwks_endpoint_refresh_ms < 1000 {
        return Err((
            "sasl_oauthbearer_jwks_endpoint_refresh_ms",
            "must be >= 1000".into(),
        ));
    }
    if config.sasl_oauthbearer_clock_skew_seconds < 0 {
        return Err(("sasl_oauthbearer_clock_skew_seconds", "must be >= 0".into()));
    }
    if config.sasl_oauthbearer_sub_claim_name.trim().is_empty() {
        return Err((
            "sasl_oauthbearer_sub_claim_name",
            "must not be empty".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_protocol_lists_when_parsing_then_only_tls12_and_13() {
        assert_eq!(
            parse_protocols("TLSv1.2, TLSv1.3").unwrap(),
            [TlsVersion::Tls12, TlsVersion::Tls13]
        );
        assert_eq!(parse_protocols("TLSv1.3").unwrap(), [TlsVersion::Tls13]);
        assert!(parse_protocols("TLSv1.1,TLSv1.2")
            .unwrap_err()
            .contains("not allowed"));
        assert!(parse_protocols("").is_err());
    }

    fn tls_config() -> BrokerConfig {
        BrokerConfig {
            listeners: "SSL://127.0.0.1:0".into(),
            ..Default::default()
        }
    }

    #[test]
    fn given_tls_listener_without_key_when_validating_then_keystore_named() {
        let c = tls_config();
        let l = c.listener_configs().unwrap();
        assert_eq!(validate(&c, &l).unwrap_err().0, "ssl_keystore_location");
        // Without a TLS listener the same config is fine.
        let plain = BrokerConfig::default();
        assert!(validate(&plain, &plain.listener_configs().unwrap()).is_ok());
    }

    #[test]
    fn given_client_auth_required_without_truststore_when_validating_then_refused() {
        let c = BrokerConfig {
            ssl_keystore_location: "k.pem".into(),
            ssl_client_auth: "required".into(),
            ..tls_config()
        };
        let l = c.listener_configs().unwrap();
        assert_eq!(validate(&c, &l).unwrap_err().0, "ssl_client_auth");
        let ok = BrokerConfig {
            ssl_truststore_location: "ca.pem".into(),
            ..c
        };
        let s = ok.tls_settings().unwrap();
        assert_eq!(s.client_auth, ClientAuth::Required);
        assert_eq!(s.trust, TrustSource::File("ca.pem".into()));
    }

    #[test]
    fn given_jks_keystore_when_validating_then_refused_with_reason() {
        let c = BrokerConfig {
            ssl_keystore_type: "JKS".into(),
            ssl_keystore_location: "k.jks".into(),
            ..tls_config()
        };
        let (key, msg) = c.tls_settings().unwrap_err();
        assert_eq!(key, "ssl_keystore_type");
        assert!(msg.contains("only PEM"), "{msg}");
    }

    #[test]
    fn given_admin_settings_when_validating_then_mtls_needs_tls_with_certificates() {
        let mtls = BrokerConfig {
            admin_authentication: "basic, mtls".into(),
            ..Default::default()
        };
        assert_eq!(validate_admin(&mtls).unwrap_err().0, "admin_authentication");
        let with_tls = BrokerConfig {
            admin_ssl_enable: true,
            admin_ssl_client_auth: "required".into(),
            ssl_keystore_location: "k.pem".into(),
            ..mtls.clone()
        };
        // Client certificates need a truststore.
        assert_eq!(
            validate_admin(&with_tls).unwrap_err().0,
            "admin_ssl_client_auth"
        );
        let ok = BrokerConfig {
            ssl_truststore_location: "ca.pem".into(),
            ..with_tls
        };
        assert!(validate_admin(&ok).is_ok());
        assert_eq!(parse_admin_methods("BASIC"), Ok((true, false)));
        assert!(parse_admin_methods("digest").is_err());
        // TLS on the admin port needs the key store, whatever the Kafka listeners.
        let no_key = BrokerConfig {
            admin_ssl_enable: true,
            ..Default::default()
        };
        assert_eq!(
            validate_admin(&no_key).unwrap_err().0,
            "ssl_keystore_location"
        );
    }

    #[test]
    fn given_oauthbearer_enabled_when_validating_then_a_local_jwks_is_needed() {
        let c = BrokerConfig {
            sasl_enabled_mechanisms: "OAUTHBEARER".into(),
            ..Default::default()
        };
        assert_eq!(
            validate_oauthbearer(&c).unwrap_err().0,
            "sasl_oauthbearer_jwks_endpoint_url"
        );
        let remote = BrokerConfig {
            sasl_oauthbearer_jwks_endpoint_url: "https://idp.example.com/jwks".into(),
            ..c.clone()
        };
        assert!(validate_oauthbearer(&remote)
            .unwrap_err()
            .1
            .contains("this machine"));
        let file = BrokerConfig {
            sasl_oauthbearer_jwks_endpoint_url: "file:///etc/strom/jwks.json".into(),
            ..c
        };
        assert!(validate_oauthbearer(&file).is_ok());
        assert_eq!(
            parse_mechanisms("OAUTHBEARER,PLAIN").unwrap(),
            [SaslMechanism::OAuthBearer, SaslMechanism::Plain]
        );
    }
}
