//! Share sessions (Kafka's `ShareSessionCache`): a member's set of share partitions on this
//! broker, so incremental ShareFetches name only what changes. Epoch 0 opens (or replaces) a
//! session, -1 closes it, any other epoch must be the next one expected. Kept on the shard
//! of the member's connection (one table per thread); a member that comes back on another
//! connection opens a new session, as the client does on SHARE_SESSION_NOT_FOUND.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use uuid::Uuid;

use super::ShareError;

pub type SessionPartition = (Uuid, i32);

#[derive(Debug, Clone, Default)]
pub struct ShareSession {
    /// The epoch the next request must carry.
    pub next_epoch: i32,
    pub partitions: BTreeSet<SessionPartition>,
}

/// What a request does to its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStep {
    /// Fetch these partitions (the whole session after the request's changes).
    Fetch(BTreeSet<SessionPartition>),
    /// The final request: acknowledge only, then the session is gone; these are the
    /// partitions whose records the member still holds are released on.
    Close(BTreeSet<SessionPartition>),
}

#[derive(Default)]
pub struct ShareSessions {
    sessions: RefCell<HashMap<(String, String), ShareSession>>,
}

thread_local! {
    static SESSIONS: Rc<ShareSessions> = Rc::new(ShareSessions::default());
}

impl ShareSessions {
    pub fn here() -> Rc<ShareSessions> {
        SESSIONS.with(|s| s.clone())
    }

    /// Applies a request's epoch, added and forgotten partitions.
    pub fn step(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        added: &[SessionPartition],
        forgotten: &[SessionPartition],
    ) -> Result<SessionStep, ShareError> {
        let key = (group.to_string(), member.to_string());
        let mut sessions = self.sessions.borrow_mut();
        match epoch {
            0 => {
                if !forgotten.is_empty() {
                    return Err(ShareError::InvalidRequest(
                        "a new share session cannot forget partitions".into(),
                    ));
                }
                let s = ShareSession {
                    next_epoch: 1,
                    partitions: added.iter().copied().collect(),
                };
                let parts = s.partitions.clone();
                sessions.insert(key, s);
                Ok(SessionStep::Fetch(parts))
            }
            -1 => {
                let s = sessions
                    .remove(&key)
                    .ok_or(ShareError::ShareSessionNotFound)?;
                let mut parts = s.partitions;
                parts.extend(added.iter().copied());
                Ok(SessionStep::Close(parts))
            }
            e => {
                let s = sessions
                    .get_mut(&key)
                    .ok_or(ShareError::ShareSessionNotFound)?;
                if s.next_epoch != e {
                    return Err(ShareError::InvalidShareSessionEpoch);
                }
                s.next_epoch = if e == i32::MAX { 1 } else { e + 1 };
                s.partitions.extend(added.iter().copied());
                for f in forgotten {
                    s.partitions.remove(f);
                }
                Ok(SessionStep::Fetch(s.partitions.clone()))
            }
        }
    }

    /// The session's next epoch without moving it (ShareAcknowledge checks the epoch too).
    pub fn check(&self, group: &str, member: &str, epoch: i32) -> Result<(), ShareError> {
        let key = (group.to_string(), member.to_string());
        let mut sessions = self.sessions.borrow_mut();
        let s = sessions
            .get_mut(&key)
            .ok_or(ShareError::ShareSessionNotFound)?;
        if s.next_epoch != epoch {
            return Err(ShareError::InvalidShareSessionEpoch);
        }
        s.next_epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_epochs_when_stepping_then_kafka_share_session_rules() {
        let s = ShareSessions::default();
        let p = (Uuid::from_u128(7), 0);
        let q = (Uuid::from_u128(7), 1);
        assert_eq!(
            s.step("g", "m", 1, &[], &[]),
            Err(ShareError::ShareSessionNotFound)
        );
        assert_eq!(
            s.step("g", "m", 0, &[p], &[]).unwrap(),
            SessionStep::Fetch([p].into())
        );
        assert_eq!(
            s.step("g", "m", 2, &[], &[]),
            Err(ShareError::InvalidShareSessionEpoch)
        );
        assert_eq!(
            s.step("g", "m", 1, &[q], &[p]).unwrap(),
            SessionStep::Fetch([q].into())
        );
        s.check("g", "m", 2).unwrap();
        assert_eq!(
            s.step("g", "m", -1, &[], &[]).unwrap(),
            SessionStep::Close([q].into())
        );
        assert_eq!(
            s.step("g", "m", -1, &[], &[]),
            Err(ShareError::ShareSessionNotFound)
        );
    }
}
