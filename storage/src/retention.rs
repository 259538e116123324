//! Which segments retention deletes: Kafka's `UnifiedLog.deleteOldSegments`, as a pure
//! function of the segments' bases, sizes and largest timestamps, so the rules can be tested
//! without files. The log (`PartitionLog::delete_old_segments`) applies the answer.
//!
//! Kafka runs three passes, each deleting a prefix of the segments:
//! 1. segments wholly below the log start offset (DeleteRecords moved it), always;
//! 2. with `cleanup.policy` containing `delete`: while the log is larger than
//!    `retention.bytes`, the oldest segments whose removal keeps it >= the limit;
//! 3. with `delete`: segments whose largest timestamp is older than `retention.ms`.
//!
//! In every pass a segment is only deletable if all its offsets are below the high watermark
//! and it is not the last segment while empty; the first segment that may not go stops the
//! pass. The active segment can go (the log rolls first, so a log always keeps a segment).

/// Retention settings of one topic (Kafka's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// `retention.ms`; negative = keep forever.
    pub retention_ms: i64,
    /// `retention.bytes` per partition; negative = no limit.
    pub retention_bytes: i64,
    /// `cleanup.policy` contains `delete` (time and size retention apply).
    pub delete: bool,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            delete: true,
        }
    }
}

/// Why segments were deleted (for logs and metrics), Kafka's reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetentionReason {
    LogStartOffsetBreach,
    RetentionSizeBreach,
    RetentionTimeBreach,
}

/// What `PartitionLog::delete_old_segments` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Base offsets of the segments deleted (renamed `.deleted`, unlinked later).
    pub deleted: Vec<i64>,
    pub bytes: u64,
    pub reasons: Vec<RetentionReason>,
    pub log_start_offset: i64,
}

/// One segment as retention sees it.
#[derive(Clone, Copy, Debug)]
pub struct SegmentInfo {
    pub base_offset: i64,
    pub size: u64,
}

/// How many leading segments to delete, and why. `largest_ts(i)` is segment `i`'s largest
/// record timestamp (its file's mtime when it has none, as Kafka); it is only asked for the
/// segments the time pass reaches.
pub fn deletable_prefix(
    segs: &[SegmentInfo],
    log_start: i64,
    log_end: i64,
    high_watermark: i64,
    now_ms: i64,
    policy: &RetentionPolicy,
    mut largest_ts: impl FnMut(usize) -> i64,
) -> (usize, Vec<RetentionReason>) {
    let mut done = 0;
    let mut reasons = Vec::new();
    let mut pass = |done: &mut usize,
                    reason: RetentionReason,
                    pred: &mut dyn FnMut(usize, Option<&SegmentInfo>) -> bool| {
        let before = *done;
        while *done < segs.len() {
            let i = *done;
            let next = segs.get(i + 1);
            let upper = next.map_or(log_end, |n| n.base_offset);
            let last_and_empty = next.is_none() && segs[i].size == 0;
            if upper > high_watermark || last_and_empty || !pred(i, next) {
                break;
            }
            *done += 1;
        }
        if *done > before {
            reasons.push(reason);
        }
    };
    pass(
        &mut done,
        RetentionReason::LogStartOffsetBreach,
        &mut |_, next| next.is_some_and(|n| n.base_offset <= log_start),
    );
    if policy.delete {
        let total: u64 = segs[done..].iter().map(|s| s.size).sum();
        if policy.retention_bytes >= 0 && total >= policy.retention_bytes as u64 {
            let mut diff = total - policy.retention_bytes as u64;
            pass(
                &mut done,
                RetentionReason::RetentionSizeBreach,
                &mut |i, _| match diff.checked_sub(segs[i].size) {
                    Some(d) => {
                        diff = d;
                        true
                    }
                    None => false,
                },
            );
        }
        if policy.retention_ms >= 0 {
            pass(
                &mut done,
                RetentionReason::RetentionTimeBreach,
                &mut |i, _| now_ms.saturating_sub(largest_ts(i)) > policy.retention_ms,
            );
        }
    }
    (done, reasons)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(spec: &[(i64, u64)]) -> Vec<SegmentInfo> {
        spec.iter()
            .map(|&(base_offset, size)| SegmentInfo { base_offset, size })
            .collect()
    }

    const NOW: i64 = 1_000_000;

    fn policy(ms: i64, bytes: i64) -> RetentionPolicy {
        RetentionPolicy {
            retention_ms: ms,
            retention_bytes: bytes,
            delete: true,
        }
    }

    #[test]
    fn given_log_start_inside_third_segment_when_checking_then_two_segments_go_even_without_delete_policy(
    ) {
        let s = segs(&[(0, 100), (10, 100), (20, 100), (30, 0)]);
        let compact = RetentionPolicy {
            delete: false,
            ..policy(0, 0)
        };
        let (n, why) = deletable_prefix(&s, 25, 30, 30, NOW, &compact, |_| 0);
        assert_eq!((n, why), (2, vec![RetentionReason::LogStartOffsetBreach]));
    }

    #[test]
    fn given_size_limit_when_checking_then_oldest_go_while_the_rest_stays_at_or_above_the_limit() {
        let s = segs(&[(0, 100), (10, 100), (20, 100), (30, 50)]);
        // 350 bytes, limit 160: 190 over; 100 + 100 would be 200 > 190, so only one goes.
        assert_eq!(
            deletable_prefix(&s, 0, 35, 35, NOW, &policy(-1, 160), |_| NOW).0,
            1
        );
        assert_eq!(
            deletable_prefix(&s, 0, 35, 35, NOW, &policy(-1, 150), |_| NOW).0,
            2
        );
        assert_eq!(
            deletable_prefix(&s, 0, 35, 35, NOW, &policy(-1, 351), |_| NOW).0,
            0
        );
        // retention.bytes 0: everything, the active segment too (the log rolls).
        assert_eq!(
            deletable_prefix(&s, 0, 35, 35, NOW, &policy(-1, 0), |_| NOW).0,
            4
        );
    }

    #[test]
    fn given_old_timestamps_when_checking_then_prefix_of_expired_segments_goes() {
        let s = segs(&[(0, 100), (10, 100), (20, 100), (30, 50)]);
        let ts = [NOW - 5000, NOW - 100, NOW - 5000, NOW - 10];
        let (n, why) = deletable_prefix(&s, 0, 35, 35, NOW, &policy(1000, -1), |i| ts[i]);
        // The second segment is young: it stops the pass although the third is old.
        assert_eq!((n, why), (1, vec![RetentionReason::RetentionTimeBreach]));
        assert_eq!(
            deletable_prefix(&s, 0, 35, 35, NOW, &policy(-1, -1), |i| ts[i]).0,
            0
        );
        // Exactly retention.ms old is kept (Kafka: strictly greater).
        assert_eq!(
            deletable_prefix(&s, 0, 35, 35, NOW, &policy(5000, -1), |i| ts[i]).0,
            0
        );
    }

    #[test]
    fn given_high_watermark_below_segment_end_when_checking_then_that_segment_stays() {
        let s = segs(&[(0, 100), (10, 100), (20, 100)]);
        assert_eq!(
            deletable_prefix(&s, 0, 30, 15, NOW, &policy(0, -1), |_| 0).0,
            1
        );
        // An empty active segment is never deleted.
        let s = segs(&[(0, 100), (10, 0)]);
        assert_eq!(
            deletable_prefix(&s, 0, 10, 10, NOW, &policy(0, -1), |_| 0).0,
            1
        );
    }
}
