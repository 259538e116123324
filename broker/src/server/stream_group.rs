//! `?group=G` on an SSE stream (`streams`): the stream consumes its partition for consumer
//! group G the way a Kafka consumer does with `assign()` and a `group.id` — no join, no
//! rebalance (the path names the partition), offsets committed to G through the broker's own
//! group coordinator, so `kafka-consumer-groups.sh --describe --group G` shows the stream's
//! position and lag, and a Kafka consumer of G carries on where the browser stopped.
//!
//! - Start: `Last-Event-ID`, then a numeric `?offset=`, then G's committed offset for the
//!   partition; without one, `?offset=earliest|latest` is the reset policy (Kafka's
//!   `auto.offset.reset`, default latest).
//! - Commits: the position after the last event handed to the connection (filtered records
//!   included), at most every `COMMIT_INTERVAL` or every `COMMIT_EVENTS` events, when the
//!   stream has caught up and the interval passed, and when the stream ends. Like Kafka's
//!   auto-commit this is at-least-once for a new page load: events in flight when the
//!   connection dropped may come again (an `EventSource` reconnecting resumes exactly, by
//!   `Last-Event-ID`).
//! - Commits go as a simple (generation -1) member's, which Kafka accepts only while G has no
//!   active members: with Kafka consumers subscribed to G, the commits are refused
//!   (logged, counted in nothing else) and the stream still flows.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::coordinator::group::coordinator::CommitItem;
use crate::coordinator::group::{self, GroupError};
use crate::shard::{frontend, BrokerContext};

/// Longest time a delivered position waits before it is committed (Kafka's auto-commit
/// default is 5 s; a browser tab reloads faster than that).
pub const COMMIT_INTERVAL: Duration = Duration::from_secs(1);
/// Events that make a commit due before the interval passed.
pub const COMMIT_EVENTS: u64 = 500;
/// The commit's metadata: names who committed in OffsetFetch answers.
const METADATA: &str = "strom-sse";

/// Runs `f` with the group coordinator of `group` (from the admin port's runtime, through
/// shard 0, which forwards to the coordinator's home shard).
async fn on_coordinator<R, F, Fut>(ctx: &Arc<BrokerContext>, g: &str, f: F) -> Result<R, GroupError>
where
    F: FnOnce(std::rc::Rc<group::GroupShard>, i32) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<R, GroupError>> + 'static,
    R: Send + 'static,
{
    let g = g.to_string();
    frontend::call_from_outside(ctx, 0, move |state| async move {
        group::on_coordinator(&state.ctx, &g, f).await
    })
    .await
    .map_err(|_| GroupError::CoordinatorNotAvailable)?
}

/// G's committed offset of the partition, if it has one.
pub async fn committed(
    ctx: &Arc<BrokerContext>,
    g: &str,
    topic: &str,
    partition: i32,
) -> Result<Option<i64>, GroupError> {
    let (gid, t) = (g.to_string(), topic.to_string());
    let fetched = on_coordinator(ctx, g, move |gs, _| async move {
        gs.fetch_offsets(&gid, None, Some(vec![(t, vec![partition])]))
    })
    .await?;
    Ok(fetched
        .into_iter()
        .flat_map(|(_, ps)| ps)
        .find_map(|(p, o)| o.filter(|o| p == partition && o.offset >= 0))
        .map(|o| o.offset))
}

async fn commit(
    ctx: Arc<BrokerContext>,
    g: String,
    topic: String,
    partition: i32,
    offset: i64,
) -> Result<(), GroupError> {
    let gid = g.clone();
    let results = on_coordinator(&ctx, &g, move |gs, _| async move {
        let item = CommitItem {
            topic,
            partition,
            offset,
            leader_epoch: -1,
            metadata: Some(METADATA.to_string()),
        };
        gs.commit(&gid, "", None, -1, 9, vec![item], None).await
    })
    .await?;
    results.into_iter().next().unwrap_or(Ok(()))
}

/// One stream's membership of G: what was delivered and what is committed.
pub struct GroupCursor {
    ctx: Arc<BrokerContext>,
    group: String,
    topic: Arc<str>,
    partition: i32,
    delivered: i64,
    committed: i64,
    events: u64,
    last_commit: Instant,
    warned: bool,
}

impl GroupCursor {
    pub fn new(
        ctx: Arc<BrokerContext>,
        group: String,
        topic: Arc<str>,
        partition: i32,
        at: i64,
    ) -> Self {
        GroupCursor {
            ctx,
            group,
            topic,
            partition,
            delivered: at,
            committed: at,
            events: 0,
            last_commit: Instant::now(),
            warned: false,
        }
    }

    /// An event was handed to the connection; `position` is the offset after it (and after
    /// the filtered records behind it).
    pub fn delivered(&mut self, position: i64) {
        if position > self.delivered {
            self.delivered = position;
            self.events += 1;
        }
    }

    /// When the delivered position is due for a commit, if it is not committed.
    pub fn due_at(&self) -> Option<Instant> {
        (self.delivered > self.committed).then(|| {
            if self.events >= COMMIT_EVENTS {
                Instant::now()
            } else {
                self.last_commit + COMMIT_INTERVAL
            }
        })
    }

    /// Commits the delivered position if it is due.
    pub async fn commit_if_due(&mut self) {
        if self.due_at().is_some_and(|d| d <= Instant::now()) {
            self.commit_now().await;
        }
    }

    async fn commit_now(&mut self) {
        let offset = self.delivered;
        let r = commit(
            self.ctx.clone(),
            self.group.clone(),
            self.topic.to_string(),
            self.partition,
            offset,
        )
        .await;
        self.last_commit = Instant::now();
        self.events = 0;
        match r {
            Ok(()) => {
                self.committed = offset;
                self.warned = false;
            }
            // Logged once per run of failures, not once a second.
            Err(e) if !self.warned => {
                self.warned = true;
                tracing::warn!(group = %self.group, topic = %self.topic, partition = self.partition, error = %e, "SSE stream: offset commit refused");
            }
            Err(_) => {}
        }
    }
}

impl Drop for GroupCursor {
    /// The stream ended (client gone, shutdown): its last position is committed on the
    /// runtime it ran on.
    fn drop(&mut self) {
        if self.delivered <= self.committed {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (ctx, g, t, p, o) = (
            self.ctx.clone(),
            std::mem::take(&mut self.group),
            self.topic.to_string(),
            self.partition,
            self.delivered,
        );
        rt.spawn(async move {
            if let Err(e) = commit(ctx, g.clone(), t.clone(), p, o).await {
                tracing::warn!(group = %g, topic = %t, partition = p, error = %e, "SSE stream: final offset commit refused");
            }
        });
    }
}
