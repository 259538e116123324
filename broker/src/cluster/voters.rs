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
    #[error("node.id {0} is not in controller.quorum.voters")]
    NotAVoter(i32),
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
