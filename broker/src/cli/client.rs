//! A Kafka admin client on the kafka-protocol crate, for the calls librdkafka's admin API lacks
//! or hides (IncrementalAlterConfigs, DescribeGroups with assignments, OffsetCommit from
//! outside a group, ListOffsets by timestamp per partition, DeleteRecords).
//!
//! Two transports behind one `call`:
//! - **TCP** (the CLI): bootstrap, ApiVersions, then each request goes where Kafka wants it
//!   (the partition's leader, the group's coordinator, any broker); works against any Kafka.
//! - **In-process** (the console on the admin port): the request frame is handled by
//!   `handlers::handle_frame` on a shard, reached with `frontend::call_from_outside`. Same
//!   codec, same handlers, same errors as a client would get; no socket and no credentials.
//!
//! Versions are negotiated per API within the range each caller was written for (e.g. Fetch
//! below v13, which names topics by id), so a newer broker never changes a request's shape.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::net::TcpStream;

use super::error::CliError;
use super::exchange::{decode_response, encode_request, exchange};
use super::secure::{Security, Stream};
use crate::shard::BrokerContext;

/// A node to send to: `ANY` is the bootstrap connection (or any broker).
pub type Node = i32;
pub const ANY: Node = -1;

enum Transport {
    Tcp {
        bootstrap: Vec<String>,
        conns: HashMap<Node, Stream>,
        security: Security,
    },
    Local {
        ctx: Arc<BrokerContext>,
        next_shard: usize,
        /// Whom the requests run as (the console's signed-in user, or ANONYMOUS).
        principal: crate::security::Principal,
    },
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct BrokerAddr {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

pub struct Client {
    transport: Transport,
    /// The broker's version range per API key.
    versions: HashMap<i16, (i16, i16)>,
    pub brokers: BTreeMap<i32, BrokerAddr>,
    pub timeout: Duration,
    correlation: i32,
}

impl Client {
    /// Connects to the first bootstrap address that answers ApiVersions, over PLAINTEXT.
    pub async fn connect(bootstrap: &str, timeout: Duration) -> Result<Client, CliError> {
        Self::connect_secure(bootstrap, timeout, Security::default()).await
    }

    /// Connects as `security` says (TLS, SASL) to the first bootstrap address that answers.
    pub async fn connect_secure(
        bootstrap: &str,
        timeout: Duration,
        security: Security,
    ) -> Result<Client, CliError> {
        let addrs: Vec<String> = bootstrap
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if addrs.is_empty() {
            return Err(CliError::Usage("--brokers is empty".into()));
        }
        let mut client = Client {
            transport: Transport::Tcp {
                bootstrap: addrs,
                conns: HashMap::new(),
                security,
            },
            versions: HashMap::new(),
            brokers: BTreeMap::new(),
            timeout,
            correlation: 0,
        };
        client.negotiate().await?;
        Ok(client)
    }

    /// A client that runs each request through the broker's own handlers, in this process,
    /// as User:ANONYMOUS.
    pub fn local(ctx: Arc<BrokerContext>, timeout: Duration) -> Client {
        Self::local_as(ctx, timeout, crate::security::Principal::anonymous())
    }

    /// In-process as `principal`: the handlers' ACL checks apply to it.
    pub fn local_as(
        ctx: Arc<BrokerContext>,
        timeout: Duration,
        principal: crate::security::Principal,
    ) -> Client {
        let versions = crate::handlers::API_TABLE
            .iter()
            .map(|s| (s.key as i16, (s.min, s.max)))
            .collect();
        Client {
            transport: Transport::Local {
                ctx,
                next_shard: 0,
                principal,
            },
            versions,
            brokers: BTreeMap::new(),
            timeout,
            correlation: 0,
        }
    }

    async fn negotiate(&mut self) -> Result<(), CliError> {
        // ApiVersions v3 (KIP-511 client name); a broker without v3 answers v0 with its ranges.
        self.versions.insert(ApiKey::ApiVersions as i16, (0, 3));
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("strom-cli"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let resp: kafka_protocol::messages::ApiVersionsResponse =
            self.call_raw(ANY, ApiKey::ApiVersions, 3, &req).await?;
        if resp.error_code != 0 && resp.api_keys.is_empty() {
            return Err(CliError::kafka("ApiVersions", resp.error_code, None));
        }
        self.versions = resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(())
    }

    /// The version to use for `key`: the highest both sides speak within `[lo, hi]`.
    fn version_for(&self, key: ApiKey, lo: i16, hi: i16) -> Result<i16, CliError> {
        let (bmin, bmax) = self.versions.get(&(key as i16)).copied().ok_or_else(|| {
            CliError::Client(format!(
                "the broker does not support {key:?} (API key {})",
                key as i16
            ))
        })?;
        let v = hi.min(bmax);
        if v < lo.max(bmin) {
            return Err(CliError::Client(format!(
                "no common version of {key:?}: broker {bmin}..={bmax}, strom {lo}..={hi}"
            )));
        }
        Ok(v)
    }

    /// Whether the broker serves `key` at `version` or above.
    pub fn supports(&self, key: ApiKey, version: i16) -> bool {
        self.versions
            .get(&(key as i16))
            .is_some_and(|(_, max)| *max >= version)
    }

    /// Sends `req` to `node` at the highest common version not above `max`; returns the
    /// response and the version used (request shapes differ by version).
    pub async fn call<R: Request>(
        &mut self,
        node: Node,
        req: &R,
        max: i16,
    ) -> Result<(R::Response, i16), CliError> {
        let key = ApiKey::try_from(R::KEY).map_err(|_| CliError::Client("unknown API".into()))?;
        let version = self.version_for(key, R::VERSIONS.min, R::VERSIONS.max.min(max))?;
        let resp = self.call_raw(node, key, version, req).await?;
        Ok((resp, version))
    }

    async fn call_raw<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &mut self,
        node: Node,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> Result<Resp, CliError> {
        self.correlation = self.correlation.wrapping_add(1);
        let correlation = self.correlation;
        if !matches!(self.transport, Transport::Local { .. }) {
            return self.call_tcp(node, key, version, correlation, req).await;
        }
        let body = encode_request(key, version, correlation, req)?;
        let resp = self.exchange_local(body.freeze()).await?;
        decode_response(key, version, correlation, resp)
    }

    async fn exchange_local(&mut self, frame: Bytes) -> Result<Bytes, CliError> {
        let Transport::Local {
            ctx,
            next_shard,
            principal,
        } = &mut self.transport
        else {
            unreachable!("local transport")
        };
        let principal = principal.clone();
        // Handlers reach every partition and coordinator from any shard: spread the calls.
        let shard = *next_shard % ctx.shard_count().max(1);
        *next_shard = next_shard.wrapping_add(1);
        let call = crate::shard::frontend::call_from_outside(ctx, shard, move |state| async move {
            // In-process calls have no socket: a session on the first listener, named
            // "console" where Kafka would show the client's address.
            let mut session = crate::security::Session::local(&state.ctx.config);
            session.client_host = Rc::from("console");
            session.set_principal(principal);
            crate::handlers::handle_frame(state, Rc::new(session), frame)
                .await
                .map(|r| r.map(|f| f.to_bytes().freeze()))
                .map_err(|e| e.to_string())
        });
        let unreachable = |reason: String| CliError::Unreachable {
            addr: format!("shard {shard}"),
            reason,
        };
        let answer = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| unreachable("timed out".into()))?
            .map_err(|e| unreachable(e.to_string()))?
            .map_err(CliError::Client)?;
        let mut frame = answer.ok_or_else(|| CliError::Client("no response".into()))?;
        frame.advance(4); // size prefix
        Ok(frame)
    }

    async fn call_tcp<Req: Encodable, Resp: Decodable + HeaderVersion>(
        &mut self,
        node: Node,
        key: ApiKey,
        version: i16,
        correlation: i32,
        req: &Req,
    ) -> Result<Resp, CliError> {
        let addr = self.address_of(node)?;
        let timeout = self.timeout;
        let Transport::Tcp {
            conns, security, ..
        } = &mut self.transport
        else {
            unreachable!("tcp transport")
        };
        let stream = match conns.entry(node) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(connect_any(&addr, timeout, security).await?)
            }
        };
        let shown = addr.join(",");
        let r = tokio::time::timeout(
            timeout,
            exchange(stream, &shown, key, version, correlation, req),
        )
        .await;
        match r {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => {
                conns.remove(&node);
                Err(e)
            }
            Err(_) => {
                conns.remove(&node);
                Err(CliError::Unreachable {
                    addr: shown,
                    reason: format!("no answer within {timeout:?}"),
                })
            }
        }
    }

    fn address_of(&self, node: Node) -> Result<Vec<String>, CliError> {
        let Transport::Tcp { bootstrap, .. } = &self.transport else {
            return Ok(vec![]);
        };
        if node == ANY {
            return Ok(bootstrap.clone());
        }
        self.brokers
            .get(&node)
            .map(|b| vec![format!("{}:{}", b.host, b.port)])
            .ok_or_else(|| CliError::Client(format!("broker {node} is not in the metadata")))
    }

    /// Metadata for `topics` (all when `None`); learns the brokers' addresses.
    pub async fn metadata(
        &mut self,
        topics: Option<&[String]>,
    ) -> Result<MetadataResponse, CliError> {
        let req = MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| {
                        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                            .with_name(Some(super::topic_name(t)))
                    })
                    .collect()
            }));
        // v12: topic ids, names still required; v10+ carries ids.
        let (resp, _) = self.call(ANY, &req, 12).await?;
        if !resp.brokers.is_empty() {
            self.brokers = resp
                .brokers
                .iter()
                .map(|b| {
                    (
                        b.node_id.0,
                        BrokerAddr {
                            node_id: b.node_id.0,
                            host: b.host.to_string(),
                            port: b.port,
                            rack: b.rack.as_ref().map(|r| r.to_string()),
                        },
                    )
                })
                .collect();
        }
        Ok(resp)
    }

    /// The coordinator of `group` (FindCoordinator key type 0), retried while it loads.
    pub async fn coordinator(&mut self, group: &str) -> Result<Node, CliError> {
        if matches!(self.transport, Transport::Local { .. }) {
            return Ok(ANY);
        }
        let mut last = None;
        for attempt in 0..10 {
            let mut req = FindCoordinatorRequest::default().with_key_type(0);
            if self.supports(ApiKey::FindCoordinator, 4) {
                req = req.with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]);
            } else {
                req = req.with_key(StrBytes::from_string(group.to_string()));
            }
            let (resp, v) = self.call(ANY, &req, 6).await?;
            let (code, message, node, host, port) = if v >= 4 {
                let c = resp
                    .coordinators
                    .first()
                    .ok_or_else(|| CliError::Client("FindCoordinator: empty answer".into()))?;
                (
                    c.error_code,
                    c.error_message.clone(),
                    c.node_id.0,
                    c.host.to_string(),
                    c.port,
                )
            } else {
                (
                    resp.error_code,
                    resp.error_message.clone(),
                    resp.node_id.0,
                    resp.host.to_string(),
                    resp.port,
                )
            };
            match code {
                0 => {
                    self.brokers.entry(node).or_insert(BrokerAddr {
                        node_id: node,
                        host,
                        port,
                        rack: None,
                    });
                    return Ok(node);
                }
                // COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS: the offsets topic is being made.
                14 | 15 => {
                    last = Some(CliError::kafka(
                        format!("FindCoordinator for group {group:?}"),
                        code,
                        message.map(|m| m.to_string()),
                    ));
                    tokio::time::sleep(Duration::from_millis(200 * (attempt + 1))).await;
                }
                _ => {
                    return Err(CliError::kafka(
                        format!("FindCoordinator for group {group:?}"),
                        code,
                        message.map(|m| m.to_string()),
                    ))
                }
            }
        }
        Err(last.expect("retried"))
    }

    /// Every broker's node id (for requests each broker answers for itself, e.g. ListGroups).
    pub fn nodes(&self) -> Vec<Node> {
        match self.transport {
            Transport::Local { .. } => vec![ANY],
            Transport::Tcp { .. } if self.brokers.is_empty() => vec![ANY],
            Transport::Tcp { .. } => self.brokers.keys().copied().collect(),
        }
    }

    /// `node` as the transport can reach it (the in-process transport is every node).
    pub fn route(&self, node: Node) -> Node {
        match self.transport {
            Transport::Local { .. } => ANY,
            Transport::Tcp { .. } => node,
        }
    }
}

async fn connect_any(
    addrs: &[String],
    timeout: Duration,
    security: &Security,
) -> Result<Stream, CliError> {
    let mut last = String::new();
    for addr in addrs {
        match tokio::time::timeout(timeout, TcpStream::connect(addr.as_str())).await {
            Ok(Ok(s)) => {
                s.set_nodelay(true).ok();
                return security.open(addr, s, timeout).await;
            }
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = format!("connect timed out after {timeout:?}"),
        }
    }
    Err(CliError::Unreachable {
        addr: addrs.join(","),
        reason: last,
    })
}
