//! The openraft type configuration of the metadata quorum, below every other file of the
//! cluster: the Raft node, its store and its network all name these.

use std::io::Cursor;

use openraft::BasicNode;

use super::image::{Command, Outcome};

pub type NodeId = u64;

openraft::declare_raft_types!(
    pub TypeConfig:
        D = Command,
        R = Outcome,
        NodeId = NodeId,
        Node = BasicNode,
);

pub type Raft = openraft::Raft<TypeConfig>;
