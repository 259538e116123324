//! `controller.quorum.voters`: Kafka's `ID@HOST:PORT,...` list of the metadata quorum.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VotersError {
    #[error("controller.quorum.voters entry `{0}` is not ID@HOST:PORT")]
    Syntax(String),
    #[error("controller.quorum.voters entry `{entry}`: {message}")]
    Address { entry: String, message: String },
    #[error("controller.quorum.voters names node {0} twice")]
    Duplicate(u64),
    #[error("node.id {0} is not in controller.quorum.voters, so it is a broker-only node, which needs strom.raft.listen (HOST:PORT: where the metadata leader sends it the log)")]
    NotAVoter(i32),
    #[error("strom.raft.listen `{value}`: {message}")]
    RaftListen { value: String, message: String },
}

/// The Raft address of a broker-only node (`observer.rs`): its `strom.raft.listen`.
pub fn observer_address(node_id: i32, raft_listen: &str) -> Result<SocketAddr, VotersError> {
    let value = raft_listen.trim();
    if value.is_empty() {
        return Err(VotersError::NotAVoter(node_id));
    }
    let fail = |message: String| VotersError::RaftListen {
        value: value.into(),
        message,
    };
    let addr = value
        .to_socket_addrs()
        .map_err(|e| fail(e.to_string()))?
        .next()
        .ok_or_else(|| fail("resolves to no address".into()))?;
    if addr.ip().is_unspecified() {
        // The leader connects to exactly this address.
        return Err(fail(
            "must be an address the other nodes can reach, not a wildcard".into(),
        ));
    }
    Ok(addr)
}

/// Node id → Raft address. Empty for a single node.
pub fn parse(list: &str) -> Result<BTreeMap<u64, SocketAddr>, VotersError> {
    let mut voters = BTreeMap::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, addr) = entry
            .split_once('@')
            .ok_or_else(|| VotersError::Syntax(entry.into()))?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| VotersError::Syntax(entry.into()))?;
        let addr = addr
            .to_socket_addrs()
            .map_err(|e| VotersError::Address {
                entry: entry.into(),
                message: e.to_string(),
            })?
            .next()
            .ok_or_else(|| VotersError::Address {
                entry: entry.into(),
                message: "resolves to no address".into(),
            })?;
        if voters.insert(id, addr).is_some() {
            return Err(VotersError::Duplicate(id));
        }
    }
    Ok(voters)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_kafka_voter_list_when_parsing_then_ids_and_addresses() {
        let v = parse("1@127.0.0.1:9192, 2@127.0.0.1:9193,3@localhost:9194").unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[&2], "127.0.0.1:9193".parse().unwrap());
        assert_eq!(v[&3].port(), 9194);
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn given_a_node_outside_the_voters_when_resolving_its_raft_address_then_strom_raft_listen() {
        assert_eq!(
            observer_address(4, " 127.0.0.1:9195 ").unwrap(),
            "127.0.0.1:9195".parse().unwrap()
        );
        assert_eq!(observer_address(4, ""), Err(VotersError::NotAVoter(4)));
        assert!(matches!(
            observer_address(4, "0.0.0.0:9195"),
            Err(VotersError::RaftListen { .. })
        ));
        assert!(matches!(
            observer_address(4, "nohost"),
            Err(VotersError::RaftListen { .. })
        ));
    }

    #[test]
    fn given_bad_voter_lists_when_parsing_then_errors() {
        assert!(matches!(
            parse("127.0.0.1:9192"),
            Err(VotersError::Syntax(_))
        ));
        assert!(matches!(
            parse("x@127.0.0.1:9"),
            Err(VotersError::Syntax(_))
        ));
        assert!(matches!(
            parse("1@nohost"),
            Err(VotersError::Address { .. })
        ));
        assert_eq!(
            parse("1@127.0.0.1:1,1@127.0.0.1:2"),
            Err(VotersError::Duplicate(1))
        );
    }
}
