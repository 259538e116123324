//! Kafka's listener settings: `listeners`, `advertised.listeners` and
//! `listener.security.protocol.map`, parsed once at load into one `ListenerConfig` per
//! listener. `listen` (`--listen`) stays the shorthand for a single PLAINTEXT listener, and
//! `advertised_listener` for its advertised address.
//!
//! The forms are Kafka's: `NAME://HOST:PORT` separated by commas, an empty host meaning every
//! interface (`PLAINTEXT://:9092`), IPv6 in brackets; the protocol map is `NAME:PROTOCOL` pairs
//! and, as in Kafka, defaults to mapping the four protocol names to themselves.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};

/// Kafka's `SecurityProtocol` (the controller's is not a client listener here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(s: &str) -> Option<SecurityProtocol> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Self::Plaintext),
            "SSL" => Some(Self::Ssl),
            "SASL_PLAINTEXT" => Some(Self::SaslPlaintext),
            "SASL_SSL" => Some(Self::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections on this protocol are wrapped in TLS.
    pub fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether a connection must complete SASL before any request but ApiVersions,
    /// SaslHandshake and SaslAuthenticate is served.
    pub fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// Kafka's default `listener.security.protocol.map`.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// One listener as configured: where to bind and what to advertise (port 0 binds any free
/// port; an advertised port of 0 then means the bound one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bind: SocketAddr,
    pub advertised_host: String,
    pub advertised_port: u16,
}

/// What went wrong, for `ConfigError::Invalid` (the caller names the key).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ListenerError {
    #[error("`{0}` is not NAME://HOST:PORT")]
    Form(String),
    #[error("listener name `{0}` is not in listener.security.protocol.map")]
    UnmappedName(String),
    #[error("`{0}` in listener.security.protocol.map is not NAME:PROTOCOL with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")]
    MapEntry(String),
    #[error("listener name `{0}` appears more than once")]
    DuplicateName(String),
    #[error("port {0} is used by more than one listener")]
    DuplicatePort(u16),
    #[error("advertised listener `{0}` is not one of the listeners")]
    UnknownAdvertised(String),
    #[error("host `{0}` does not resolve to an address to bind")]
    Resolve(String),
    #[error("no listener configured")]
    Empty,
}

/// `NAME://HOST:PORT` → (name, host, port). The name is upper-cased as Kafka does.
fn parse_endpoint(s: &str) -> Result<(String, String, u16), ListenerError> {
    let form = || ListenerError::Form(s.to_string());
    let (name, rest) = s.trim().split_once("://").ok_or_else(form)?;
    let (host, port) = rest.rsplit_once(':').ok_or_else(form)?;
    let port: u16 = port.parse().map_err(|_| form())?;
    let name = name.trim().to_ascii_uppercase();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(form());
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((name, host.to_string(), port))
}

fn split_list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// `listener.security.protocol.map` → (name, protocol) pairs.
pub fn parse_protocol_map(s: &str) -> Result<Vec<(String, SecurityProtocol)>, ListenerError> {
    split_list(s)
        .map(|entry| {
            let (name, proto) = entry
                .split_once(':')
                .ok_or_else(|| ListenerError::MapEntry(entry.into()))?;
            let proto = SecurityProtocol::parse(proto)
                .ok_or_else(|| ListenerError::MapEntry(entry.into()))?;
            Ok((name.trim().to_ascii_uppercase(), proto))
        })
        .collect()
}

fn bind_addr(host: &str, port: u16) -> Result<SocketAddr, ListenerError> {
    if host.is_empty() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| ListenerError::Resolve(host.to_string()))
}

/// The host advertised for a listener bound to every interface (Kafka: the canonical host
/// name of the machine).
fn local_host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer we own.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
    match std::str::from_utf8(&buf[..end]) {
        Ok(name) if ok && !name.is_empty() => name.to_string(),
        _ => "localhost".into(),
    }
}

/// Every listener of the config: `listeners` when set, else one PLAINTEXT listener on
/// `listen`; advertised addresses from `advertised.listeners`, else from
/// `advertised_listener` (only for the `listen` form), else the listener's own.
pub fn resolve(
    listen: SocketAddr,
    listeners: &str,
    advertised_listener: Option<(String, i32)>,
    advertised_listeners: &str,
    protocol_map: &str,
) -> Result<Vec<ListenerConfig>, ListenerError> {
    let map = parse_protocol_map(protocol_map)?;
    let mut out: Vec<ListenerConfig> = Vec::new();
    if listeners.trim().is_empty() {
        let (host, port) = advertised_listener
            .map(|(h, p)| (h, p as u16))
            .unwrap_or_else(|| (listen.ip().to_string(), listen.port()));
        out.push(ListenerConfig {
            name: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            bind: listen,
            advertised_host: host,
            advertised_port: port,
        });
    } else {
        for entry in split_list(listeners) {
            let (name, host, port) = parse_endpoint(entry)?;
            let protocol = map
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, p)| *p)
                .ok_or_else(|| ListenerError::UnmappedName(name.clone()))?;
            if out.iter().any(|l| l.name == name) {
                return Err(ListenerError::DuplicateName(name));
            }
            if port != 0 && out.iter().any(|l| l.bind.port() == port) {
                return Err(ListenerError::DuplicatePort(port));
            }
            let bind = bind_addr(&host, port)?;
            let advertised_host = if host.is_empty() {
                local_host_name()
            } else {
                host
            };
            out.push(ListenerConfig {
                name,
                protocol,
                bind,
                advertised_host,
                advertised_port: port,
            });
        }
    }
    if out.is_empty() {
        return Err(ListenerError::Empty);
    }
    for entry in split_list(advertised_listeners) {
        let (name, host, port) = parse_endpoint(entry)?;
        let l = out
            .iter_mut()
            .find(|l| l.name == name)
            .ok_or(ListenerError::UnknownAdvertised(name))?;
        if !host.is_empty() {
            l.advertised_host = host;
        }
        l.advertised_port = port;
    }
    Ok(out)
}

/// The listeners as Kafka's `listeners` value shows them (DescribeConfigs).
pub fn render(listeners: &[ListenerConfig]) -> String {
    listeners
        .iter()
        .map(|l| format!("{}://{}", l.name, l.bind))
        .collect::<Vec<_>>()
        .join(",")
}

/// The advertised side, as Kafka's `advertised.listeners` shows it.
pub fn render_advertised(listeners: &[ListenerConfig]) -> String {
    listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen() -> SocketAddr {
        "127.0.0.1:9092".parse().unwrap()
    }

    #[test]
    fn given_no_listeners_when_resolving_then_one_plaintext_on_listen() {
        let l = resolve(listen(), "", None, "", DEFAULT_PROTOCOL_MAP).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].name, "PLAINTEXT");
        assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(
            (l[0].advertised_host.as_str(), l[0].advertised_port),
            ("127.0.0.1", 9092)
        );
        let adv = resolve(
            listen(),
            "",
            Some(("example".into(), 19092)),
            "",
            DEFAULT_PROTOCOL_MAP,
        )
        .unwrap();
        assert_eq!(
            (adv[0].advertised_host.as_str(), adv[0].advertised_port),
            ("example", 19092)
        );
    }

    #[test]
    fn given_kafka_listeners_when_resolving_then_names_protocols_and_advertised() {
        let l = resolve(
            listen(),
            "PLAINTEXT://127.0.0.1:9092, sasl_ssl://127.0.0.1:9093,INTERNAL://[::1]:9094",
            None,
            "SASL_SSL://broker.example:19093",
            &format!("{DEFAULT_PROTOCOL_MAP},INTERNAL:SSL"),
        )
        .unwrap();
        let names: Vec<_> = l.iter().map(|l| (l.name.as_str(), l.protocol)).collect();
        assert_eq!(
            names,
            [
                ("PLAINTEXT", SecurityProtocol::Plaintext),
                ("SASL_SSL", SecurityProtocol::SaslSsl),
                ("INTERNAL", SecurityProtocol::Ssl)
            ]
        );
        assert_eq!(l[1].advertised_host, "broker.example");
        assert_eq!(l[1].advertised_port, 19093);
        assert_eq!(l[2].bind, "[::1]:9094".parse().unwrap());
        assert_eq!(l[0].advertised_host, "127.0.0.1");
    }

    #[test]
    fn given_bad_listener_settings_when_resolving_then_the_error_says_which() {
        let r = |ls: &str, adv: &str, map: &str| resolve(listen(), ls, None, adv, map).unwrap_err();
        assert_eq!(
            r("FOO://127.0.0.1:1", "", DEFAULT_PROTOCOL_MAP),
            ListenerError::UnmappedName("FOO".into())
        );
        assert!(matches!(
            r("127.0.0.1:1", "", DEFAULT_PROTOCOL_MAP),
            ListenerError::Form(_)
        ));
        assert_eq!(
            r(
                "SSL://127.0.0.1:1,SSL://127.0.0.1:2",
                "",
                DEFAULT_PROTOCOL_MAP
            ),
            ListenerError::DuplicateName("SSL".into())
        );
        assert_eq!(
            r(
                "SSL://127.0.0.1:1,PLAINTEXT://127.0.0.1:1",
                "",
                DEFAULT_PROTOCOL_MAP
            ),
            ListenerError::DuplicatePort(1)
        );
        assert_eq!(
            r("SSL://127.0.0.1:1", "PLAINTEXT://x:1", DEFAULT_PROTOCOL_MAP),
            ListenerError::UnknownAdvertised("PLAINTEXT".into())
        );
        assert!(matches!(
            r("SSL://127.0.0.1:1", "", "SSL:TLS"),
            ListenerError::MapEntry(_)
        ));
    }

    #[test]
    fn given_port_zero_listeners_when_resolving_then_both_allowed() {
        let l = resolve(
            listen(),
            "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            None,
            "",
            DEFAULT_PROTOCOL_MAP,
        )
        .unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(render(&l), "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0");
    }
}
