//! What the `request_percentage` quota meters: the time a request's work runs on the shard's
//! thread, not the time it waits.
//!
//! Kafka records a request's time on its request-handler thread (`requestThreadTimeNanos`):
//! an OffsetCommit waiting for its append to be replicated, or a produce waiting in
//! purgatory for acks=all, is parked and costs the thread nothing. Strom's handlers are
//! futures on the shard's one thread, so the same measure is the time spent inside `poll`:
//! `BusyMeter::run` adds up each poll of the request's future and leaves out the time it is
//! pending on an fsync, a replication round, a coordinator or another shard. Work another
//! shard does for the request (the append on a partition's home shard) runs in that shard's
//! own task and is not counted here.

use std::cell::Cell;
use std::future::Future;
use std::time::{Duration, Instant};

/// The poll time of one request (single-threaded: a `RequestContext` never leaves its shard).
#[derive(Debug, Default)]
pub struct BusyMeter {
    /// The polls that have ended.
    busy: Cell<Duration>,
    /// When the poll in progress started, if one is.
    polling_since: Cell<Option<Instant>>,
}

impl BusyMeter {
    /// Runs `work`, adding the time of each of its polls. A `run` inside another on the same
    /// meter counts nothing itself: the outer poll already covers it.
    pub async fn run<F: Future>(&self, work: F) -> F::Output {
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            if self.polling_since.get().is_some() {
                return work.as_mut().poll(cx);
            }
            let start = Instant::now();
            self.polling_since.set(Some(start));
            let polled = work.as_mut().poll(cx);
            self.polling_since.set(None);
            self.busy.set(self.busy.get() + start.elapsed());
            polled
        })
        .await
    }

    /// The time polled so far, the poll in progress included (the quota is recorded from
    /// inside the request's own future).
    pub fn busy(&self) -> Duration {
        let current = self
            .polling_since
            .get()
            .map_or(Duration::ZERO, |s| s.elapsed());
        self.busy.get() + current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn given_work_that_waits_then_computes_when_metered_then_only_the_computing_counts() {
        let meter = BusyMeter::default();
        let wall = Instant::now();
        let seen_inside = block_on(meter.run(async {
            // An fsync or a replication round: parked, the thread is free.
            tokio::time::sleep(Duration::from_millis(300)).await;
            spin(Duration::from_millis(40));
            // What the handler records before it answers includes the poll in progress.
            meter.busy()
        }));
        assert!(wall.elapsed() >= Duration::from_millis(340));
        let busy = meter.busy();
        assert!(
            busy >= Duration::from_millis(40) && busy < Duration::from_millis(200),
            "{busy:?}"
        );
        assert!(seen_inside >= Duration::from_millis(40), "{seen_inside:?}");
        assert!(seen_inside <= busy);
    }

    #[test]
    fn given_nested_runs_when_metered_then_counted_once() {
        let meter = BusyMeter::default();
        block_on(meter.run(async {
            spin(Duration::from_millis(30));
            meter
                .run(async {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    spin(Duration::from_millis(30));
                })
                .await;
        }));
        let busy = meter.busy();
        assert!(
            busy >= Duration::from_millis(60) && busy < Duration::from_millis(150),
            "{busy:?}"
        );
    }
}
