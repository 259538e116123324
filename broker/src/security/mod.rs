//! Who a connection is: the listener it came in on, the client's address and the
//! authenticated principal (Kafka's `KafkaPrincipal`), as every handler sees them through
//! `handlers::RequestContext::session`.
//!
//! The server layer authenticates (TLS client certificates now, SASL next) and writes the
//! principal here; handlers read it. Sits below `handlers/` and above `config/`.
//!
//! - `ssl_principal`: a client certificate's subject as Java's RFC 2253 form, and Kafka's
//!   `ssl.principal.mapping.rules` that turn it into the principal's name.
//! - `plain`, `scram`, `oauthbearer` (+ `jwks`, the keys its tokens are checked against):
//!   the SASL mechanisms' parsers and checks; `server::sasl` runs the exchanges.

pub mod acl;
pub mod authorizer;
pub mod jwks;
pub mod oauthbearer;
pub mod plain;
pub mod scram;
pub mod ssl_principal;

use std::cell::RefCell;
use std::fmt;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use crate::config::listeners::{ListenerConfig, SecurityProtocol};

/// Kafka's `KafkaPrincipal`: a type (always "User" for what the broker authenticates) and a
/// name. Shown as `User:name`, the form ACLs and `super.users` use.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub kind: &'static str,
    pub name: String,
}

impl Principal {
    pub const USER: &'static str = "User";

    pub fn user(name: impl Into<String>) -> Principal {
        Principal {
            kind: Self::USER,
            name: name.into(),
        }
    }

    /// Kafka's `KafkaPrincipal.ANONYMOUS`: a PLAINTEXT connection, or TLS without a client
    /// certificate.
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

/// A bound listener: its name and protocol, and the address Metadata gives clients that
/// came in on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerInfo {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub bound: SocketAddr,
    pub advertised_host: String,
    pub advertised_port: i32,
}

impl ListenerInfo {
    /// The listener as bound: a configured port of 0 is advertised as the bound port.
    pub fn bound(config: &ListenerConfig, bound: SocketAddr) -> ListenerInfo {
        let port = if config.advertised_port == 0 {
            bound.port()
        } else {
            config.advertised_port
        };
        ListenerInfo {
            name: config.name.clone(),
            protocol: config.protocol,
            bound,
            advertised_host: config.advertised_host.clone(),
            advertised_port: port as i32,
        }
    }
}

/// One connection's identity. The principal is set once authentication completes (at the
/// TLS handshake for SSL; by SaslAuthenticate for SASL) and read by every request after.
#[derive(Debug)]
pub struct Session {
    /// The client's address as Kafka reports it in group descriptions (`/127.0.0.1`).
    pub client_host: Rc<str>,
    pub listener: Arc<ListenerInfo>,
    principal: RefCell<Principal>,
    /// Until when the connection reads no request: a client over its quota is muted for
    /// its throttle time (`quota`; `server::connection` honours it).
    muted_until: std::cell::Cell<Option<tokio::time::Instant>>,
    /// The client's port (0 when unknown): a KIP-714 `match` attribute.
    pub client_port: u16,
    /// The client's software name and version, as its ApiVersions v3+ said (KIP-511).
    software: RefCell<(Rc<str>, Rc<str>)>,
}

impl Session {
    pub fn new(client_host: Rc<str>, listener: Arc<ListenerInfo>, principal: Principal) -> Self {
        Session {
            client_host,
            listener,
            principal: RefCell::new(principal),
            muted_until: Default::default(),
            client_port: 0,
            software: RefCell::new(("".into(), "".into())),
        }
    }

    pub fn with_client_port(mut self, port: u16) -> Self {
        self.client_port = port;
        self
    }

    pub fn set_software(&self, name: &str, version: &str) {
        *self.software.borrow_mut() = (name.into(), version.into());
    }

    /// (name, version) of the client's software; empty until its ApiVersions names them.
    pub fn software(&self) -> (Rc<str>, Rc<str>) {
        self.software.borrow().clone()
    }

    /// Mutes the connection for `ms` from now (or longer, if it is muted longer already).
    pub fn mute_for(&self, ms: i64) {
        if ms <= 0 {
            return;
        }
        let until = tokio::time::Instant::now() + std::time::Duration::from_millis(ms as u64);
        if self.muted_until.get().is_none_or(|u| u < until) {
            self.muted_until.set(Some(until));
        }
    }

    /// When the connection may read again, if it is muted; clears the mute.
    pub fn take_mute(&self) -> Option<tokio::time::Instant> {
        self.muted_until.take()
    }

    pub fn principal(&self) -> Principal {
        self.principal.borrow().clone()
    }

    pub fn set_principal(&self, p: Principal) {
        *self.principal.borrow_mut() = p;
    }

    /// An anonymous session on the first listener of `config` (in-process tests and tools
    /// that call handlers without a socket).
    pub fn local(config: &crate::config::BrokerConfig) -> Session {
        let l = config
            .listener_configs()
            .ok()
            .and_then(|l| l.into_iter().next())
            .map(|l| {
                let bound = l.bind;
                ListenerInfo::bound(&l, bound)
            })
            .unwrap_or_else(|| ListenerInfo {
                name: "PLAINTEXT".into(),
                protocol: SecurityProtocol::Plaintext,
                bound: config.listen,
                advertised_host: config.listen.ip().to_string(),
                advertised_port: config.listen.port() as i32,
            });
        Session::new("/127.0.0.1".into(), Arc::new(l), Principal::anonymous())
    }
}
